//! How the edge's traffic is spread over the places that count on their own
//! (`"edge_spread"` in a configuration): Cloudflare locations, each with its own counts on
//! the Workers Rate Limiting binding, and in each location isolates, each with its own
//! isolate counts, block cache and checks before a body is read. A rule counted in a Durable
//! Object is exact whatever the spread; one counted in the isolate admits up to isolates ×
//! locations × its limit, one on the binding up to locations × its limit.
//!
//! ```json
//! "edge_spread": {"locations": 3, "isolates": [50, 30, 20]}
//! ```
//!
//! A number is that many places fed round-robin; an array is one place per weight, fed in
//! proportion to the weights (smooth weighted round-robin: deterministic, and as even as the
//! weights allow).
//!
//! Each colo of the traffic has its own locations and isolates (`"colos": "apart"`, the
//! default: colos are different machines), unless `"colos": "together"` puts every colo's
//! requests in the same ones — one workerd serving them all, which is how `sluicegate
//! replay` runs the edge.

use super::SimError;
use alloc::format;
use alloc::vec;
use alloc::vec::Vec;
use serde_json::Value;

/// The most places of either kind.
pub const MAX_PLACES: usize = 1_000;

/// The spread: the weight of each location and of each isolate in a location.
#[derive(Clone, Debug, PartialEq)]
pub struct Spread {
    /// One weight per location.
    pub locations: Vec<f64>,
    /// One weight per isolate of a location.
    pub isolates: Vec<f64>,
    /// Whether every colo's requests land in the same locations and isolates.
    pub colos_together: bool,
}

impl Default for Spread {
    /// One location, one isolate: the spread of a replay against one Worker.
    fn default() -> Self {
        Spread { locations: vec![1.0], isolates: vec![1.0], colos_together: false }
    }
}

impl Spread {
    /// `edge_spread` as a configuration gives it (absent: one location, one isolate).
    ///
    /// # Errors
    /// A field other than `locations` and `isolates`, or a count or weights that are not
    /// 1–1000 places of positive weight, named.
    pub fn from_value(value: Option<&Value>) -> Result<Spread, SimError> {
        let Some(value) = value.filter(|v| !v.is_null()) else { return Ok(Spread::default()) };
        let problem = |msg: alloc::string::String| SimError::Input(format!("edge_spread: {msg}"));
        let obj = value
            .as_object()
            .ok_or_else(|| problem(format!("must be an object with \"locations\" and/or \"isolates\", got {value}")))?;
        if let Some(other) = obj.keys().find(|k| !["locations", "isolates", "colos"].contains(&k.as_str())) {
            return Err(problem(format!(
                "unknown field \"{other}\"; it has \"locations\", \"isolates\" and \"colos\""
            )));
        }
        let colos_together = match obj.get("colos").map(|v| (v, v.as_str())) {
            None | Some((_, Some("apart"))) => false,
            Some((_, Some("together"))) => true,
            Some((v, _)) => {
                return Err(problem(format!(
                    "colos must be \"apart\" (the default: each colo its own locations and isolates) or \
                     \"together\" (every colo in the same ones, as one workerd serves them), got {v}"
                )))
            }
        };
        let places = |field: &str| -> Result<Vec<f64>, SimError> {
            let how =
                format!("a whole number of places fed round-robin (1 to {MAX_PLACES}), or an array of their weights");
            match obj.get(field) {
                None => Ok(vec![1.0]),
                Some(Value::Number(n)) => match n.as_u64() {
                    Some(n @ 1..) if n as usize <= MAX_PLACES => Ok(vec![1.0; n as usize]),
                    _ => Err(problem(format!("{field} must be {how}, got {n}"))),
                },
                Some(Value::Array(items)) if (1..=MAX_PLACES).contains(&items.len()) => items
                    .iter()
                    .map(|w| w.as_f64().filter(|w| w.is_finite() && *w > 0.0))
                    .collect::<Option<Vec<f64>>>()
                    .ok_or_else(|| problem(format!("{field}: each weight must be a positive number, got {value}"))),
                Some(other) => Err(problem(format!("{field} must be {how}, got {other}"))),
            }
        };
        Ok(Spread { locations: places("locations")?, isolates: places("isolates")?, colos_together })
    }

    /// The colo whose places a request of `colo` lands in.
    pub fn colo_of<'c>(&self, colo: &'c str) -> &'c str {
        if self.colos_together {
            ""
        } else {
            colo
        }
    }

    /// Whether traffic reaches more than one place.
    pub fn is_spread(&self) -> bool {
        self.locations.len() > 1 || self.isolates.len() > 1
    }

    /// How the spread reads in a report: `8 isolates × 3 locations`.
    pub fn describe(&self) -> alloc::string::String {
        format!("{} × {}", plural(self.isolates.len(), "isolate"), plural(self.locations.len(), "location"))
    }
}

/// `n` places of `what`: `1 location`, `3 locations`.
pub fn plural(n: usize, what: &str) -> alloc::string::String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

/// Smooth weighted round-robin over weights: each turn every place gains its weight, and the
/// one ahead (the first, on a tie) is picked and loses the total.
#[derive(Clone, Debug)]
struct Turns {
    weights: Vec<f64>,
    current: Vec<f64>,
    total: f64,
}

impl Turns {
    fn new(weights: &[f64]) -> Self {
        Turns { weights: weights.to_vec(), current: vec![0.0; weights.len()], total: weights.iter().sum() }
    }

    fn turn(&mut self) -> usize {
        let mut best = 0;
        for i in 0..self.current.len() {
            self.current[i] += self.weights[i];
            if self.current[i] > self.current[best] {
                best = i;
            }
        }
        self.current[best] -= self.total;
        best
    }
}

/// Where each request lands: a location, then an isolate of that location.
#[derive(Clone, Debug)]
pub struct Placer {
    locations: Turns,
    isolates: Vec<Turns>,
}

impl Placer {
    /// Requests placed by `spread`.
    pub fn new(spread: &Spread) -> Self {
        Placer {
            locations: Turns::new(&spread.locations),
            isolates: vec![Turns::new(&spread.isolates); spread.locations.len()],
        }
    }

    /// The next request's place: `(location, isolate)`.
    pub fn place(&mut self) -> (usize, usize) {
        let location = self.locations.turn();
        (location, self.isolates[location].turn())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_places_are_fed_round_robin_and_weights_in_proportion() {
        let mut even = Placer::new(&Spread { locations: vec![1.0; 2], isolates: vec![1.0; 3], colos_together: false });
        let places: Vec<_> = (0..6).map(|_| even.place()).collect();
        assert_eq!(places, [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2)]);
        let mut weighted =
            Placer::new(&Spread { locations: vec![1.0], isolates: vec![50.0, 30.0, 20.0], colos_together: false });
        let mut counts = [0; 3];
        for _ in 0..1000 {
            counts[weighted.place().1] += 1;
        }
        assert_eq!(counts, [500, 300, 200]);
    }

    #[test]
    fn a_spread_is_read_from_a_count_or_weights_and_refused_by_name() {
        let read = |text: &str| Spread::from_value(Some(&serde_json::from_str(text).unwrap()));
        assert_eq!(read(r#"{"isolates": 8}"#).unwrap().isolates.len(), 8);
        assert_eq!(read(r#"{"locations": [3, 1]}"#).unwrap().locations, [3.0, 1.0]);
        assert_eq!(Spread::from_value(None).unwrap(), Spread::default());
        for (text, says) in [
            (r#"{"isolates": 0}"#, "isolates must be a whole number"),
            (r#"{"locations": [1, -2]}"#, "each weight must be a positive number"),
            (r#"{"isolate": 2}"#, "unknown field \"isolate\""),
            (r#"{"isolates": 2.5}"#, "isolates must be"),
            (r#"{"colos": "mixed"}"#, "colos must be \"apart\""),
        ] {
            let SimError::Input(msg) = read(text).unwrap_err() else { panic!("an input error") };
            assert!(msg.starts_with("edge_spread: ") && msg.contains(says), "{text}: {msg}");
        }
        assert_eq!(read(r#"{"isolates": 8, "locations": 3}"#).unwrap().describe(), "8 isolates × 3 locations");
        let together = read(r#"{"colos": "together"}"#).unwrap();
        assert_eq!((together.colo_of("AMS"), Spread::default().colo_of("AMS")), ("", "AMS"));
    }
}
