//! The edge's configuration reader: JSON text to a [`Value`], refusing a repeated key
//! anywhere (a plain parse keeps the last one), with problems named by where they are
//! (`rules[2]`, field `match.path`). Rules, tenants, overrides and egress asks all read
//! through it.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::cell::RefCell;
use core::fmt;
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// One problem in a rules file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleError {
    /// Which rule: `rules[2] ("api")`, or `None` for the file as a whole.
    pub rule: Option<String>,
    /// The field, e.g. `period` or `match.path.starts_with`.
    pub field: String,
    /// What is wrong and what is allowed.
    pub message: String,
}

impl fmt::Display for RuleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.rule {
            Some(item) if item.starts_with("upstreams[") => {
                write!(f, "upstream {}: field \"{}\": {}", item, self.field, self.message)
            }
            Some(item) if item.starts_with("pre_read") || item == "tenants" || item.starts_with("egress") => {
                write!(f, "{}: field \"{}\": {}", item, self.field, self.message)
            }
            Some(rule) => write!(f, "rule {}: field \"{}\": {}", rule, self.field, self.message),
            None if self.field.is_empty() => write!(f, "rules file: {}", self.message),
            None => write!(f, "rules file: field \"{}\": {}", self.field, self.message),
        }
    }
}

/// `text` as a message shows it: whole up to 80 characters, else its start and its length
/// (a rules file's strings may be megabytes long).
pub fn brief(text: &str) -> String {
    match text.char_indices().nth(64) {
        Some((cut, _)) if text.chars().nth(80).is_some() => format!("{}… ({} bytes)", &text[..cut], text.len()),
        _ => text.to_string(),
    }
}

/// The JSON text as a [`Value`], refusing an object that repeats a key anywhere: a plain
/// parse keeps the last value, so `{"rules": [...], "rules": []}` would silently mean no
/// rules at all.
pub fn strict_json(text: &str) -> Result<Value, RuleError> {
    let duplicate = RefCell::new(None);
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let parsed = Strict { path: String::new(), duplicate: &duplicate }
        .deserialize(&mut deserializer)
        .and_then(|value| deserializer.end().map(|()| value));
    let value =
        parsed.map_err(|e| RuleError { rule: None, field: String::new(), message: format!("not valid JSON: {e}") })?;
    match duplicate.into_inner() {
        Some((path, key)) => {
            let (rule, field) = split_path(&path, &key);
            Err(RuleError { rule, field, message: "is given twice; a JSON object must not repeat a key".into() })
        }
        None => Ok(value),
    }
}

/// `rules[2].match` + `path` → rule `rules[2]`, field `match.path`; outside a rule, the
/// field is the whole path.
fn split_path(path: &str, key: &str) -> (Option<String>, String) {
    let full = if path.is_empty() { key.to_string() } else { format!("{path}.{key}") };
    match full.strip_prefix("rules[").and_then(|rest| rest.split_once(']')) {
        Some((index, rest)) if !rest.is_empty() => {
            (Some(format!("rules[{index}]")), rest.trim_start_matches('.').to_string())
        }
        _ => (None, full),
    }
}

/// A [`Value`] deserialiser that knows where it is (`rules[0].match`) and records the first
/// repeated key (parsing goes on, so a syntax error later in the file is still reported).
struct Strict<'a> {
    path: String,
    duplicate: &'a RefCell<Option<(String, String)>>,
}

impl<'de> DeserializeSeed<'de> for Strict<'_> {
    type Value = Value;
    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        loop {
            let seed = Strict { path: format!("{}[{}]", self.path, items.len()), duplicate: self.duplicate };
            match seq.next_element_seed(seed)? {
                Some(item) => items.push(item),
                None => return Ok(Value::Array(items)),
            }
        }
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) && self.duplicate.borrow().is_none() {
                *self.duplicate.borrow_mut() = Some((self.path.clone(), key.clone()));
            }
            let path = if self.path.is_empty() { key.clone() } else { format!("{}.{key}", self.path) };
            let value = map.next_value_seed(Strict { path, duplicate: self.duplicate })?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}
