//! The Durable Object behind each counting key: exact counts, and blocks that outlive a
//! restart.

use crate::clock::now;
use crate::config::{config, Config};
use crate::fleet;
use crate::js::{self, Env};
use crate::log::{describe, log_error};
use sluicegate::analytics::{Batch, Minutes, MINUTE_MS, RETENTION_MINUTES};
use sluicegate::limit::Decision;
use sluicegate::pipeline::counting::{Counts, Stored};
use sluicegate::rules::{BudgetScope, Characteristic, Enforce, Rule, RuleOverride, RuleOverrides, Upstream};

use sluicegate::pipeline::tenant::Charge;
use sluicegate::pipeline::tenant_store::{record_key, TenantStore};
use sluicegate::tenants::{Overrides, TenantLimit};
use sluicegate::time::{Instant, Span};
use wasm_bindgen::prelude::*;

/// The state behind one Durable Object: exact counts for the keys routed to it (one, as
/// the Worker names objects by counting key).
///
/// Counts live in memory. Blocks are also written to the object's storage when they start,
/// so a restart or a deploy does not lift a block: a key's first check after a restart
/// restores its block if one is still in force. A rule whose period (or bucket refill) is
/// longer than a minute ([`Rule::keeps_state`]) also writes its whole count after every
/// check, so an object evicted while idle and recreated goes on counting where it was.
#[wasm_bindgen]
pub struct Counter {
    config: Config,
    /// The counts of the keys routed here, as the pipeline keeps them.
    limiters: Counts,
    kv: Option<js::SyncKv>,
    /// The fleet-wide upstream budgets this object keeps (one upstream per object).
    fleet: fleet::Shared,
    /// The fleet-wide egress budgets this object keeps (one provider per object).
    egress: crate::egress::Shared,
    /// Tenant buckets (one tenant per object, per colo or for the fleet, so one entry:
    /// idle objects are evicted by the platform), with the generation and limit (as JSON)
    /// they are of, and whether that limit's buckets are written down (see
    /// [`TenantLimit::keeps_state`]): an evicted object then goes on where it was, so a
    /// tenant's debt is never forgotten with the object's memory.
    tenants: TenantStore,
    /// The runtime overrides of tenant limits (kept by the one object named
    /// [`OVERRIDES_OBJECT`]), read from storage on first use.
    overrides: Option<Overrides>,
    /// The runtime overrides of rules' `enforce` (kept by the same object), read from
    /// storage on first use.
    rule_overrides: Option<RuleOverrides>,
    /// The Worker's `env`, for the keyed hash of log lines.
    env: Env,
    /// The decisions counted per minute (kept by the one object named `sluicegate-stats`,
    /// which `crate::stats` sends them to), read from storage on first use.
    stats: Option<Minutes>,
}

/// Where that object stores each minute: this, then the minute's start in ms.
const STATS_KEY: &str = "stats:";

/// The name of the object that keeps the runtime overrides.
pub const OVERRIDES_OBJECT: &str = "tenant-overrides";
/// Where that object stores them.
const OVERRIDES_KEY: &str = "tenant-overrides";
/// Where it stores the overrides of rules' `enforce`.
const RULE_OVERRIDES_KEY: &str = "rule-overrides";

#[wasm_bindgen]
impl Counter {
    /// A counter reading the same rules as the Worker (parsed once per isolate, shared with
    /// every other object in it), keeping blocks in `storage` (`ctx.storage`; blocks stay in
    /// memory only when it has no synchronous `kv`).
    #[wasm_bindgen(constructor)]
    pub fn new(env: JsValue, storage: JsValue) -> Counter {
        crate::panic::install();
        let env: Env = env.unchecked_into();
        let kv = if storage.is_object() { storage.unchecked_into::<js::Storage>().kv() } else { JsValue::UNDEFINED };
        let kv = if kv.is_object() {
            Some(kv.unchecked_into())
        } else {
            log_error(
                "sluicegate: this Durable Object has no storage.kv (not SQLite-backed): blocks are kept in memory only",
            );
            None
        };
        Counter {
            config: config(&env),
            limiters: Counts::default(),
            kv,
            fleet: fleet::Shared::default(),
            egress: crate::egress::Shared::default(),
            tenants: TenantStore::default(),
            overrides: None,
            rule_overrides: None,
            env,
            stats: None,
        }
    }

    /// Add an isolate's batch of counted decisions ([`sluicegate::analytics::Batch`] as JSON)
    /// at `now` (ms), writing down each minute it changed and deleting those past the
    /// retention.
    ///
    /// `true` once it is merged (a call answers something, so the caller can tell an answer
    /// from a timeout).
    ///
    /// # Errors
    /// A batch that is not one, or storage that refused a write (the minutes written before
    /// it are kept; the isolate counts the batch as lost after a second failure).
    #[wasm_bindgen(js_name = mergeStats)]
    pub fn merge_stats(&mut self, batch: &str, now: f64) -> Result<bool, JsError> {
        let batch = Batch::from_json(batch).map_err(|e| JsError::new(&e))?;
        let now = now.max(0.0) as u64;
        let stats = self.stats();
        let (changed, dropped) = (stats.merge(&batch, now), stats.prune(now));
        let (Some(kv), Some(stats)) = (self.kv.as_ref(), self.stats.as_ref()) else { return Ok(true) };
        for minute in changed {
            if let Some(json) = stats.minute_json(minute) {
                kv.put(&format!("{STATS_KEY}{minute}"), &JsValue::from_str(&json))
                    .map_err(|e| JsError::new(&format!("the stats could not be stored: {}", describe(&e))))?;
            }
        }
        for minute in dropped {
            let _ = kv.delete(&format!("{STATS_KEY}{minute}"));
        }
        Ok(true)
    }

    /// The stats from `since` to `until` (ms), of the subjects named `name` alone unless it is
    /// empty, as JSON ([`sluicegate::analytics::Stats`]).
    #[wasm_bindgen(js_name = getStats)]
    pub fn get_stats(&mut self, since: f64, until: f64, name: &str) -> String {
        let name = Some(name).filter(|n| !n.is_empty());
        self.stats().query(since.max(0.0) as u64, until.max(0.0) as u64, name).to_json()
    }

    /// Every runtime override, as stored (`{"tenant": {"limit": {...}, "set_at": ms}}`).
    #[wasm_bindgen(js_name = getOverrides)]
    pub fn get_overrides(&mut self) -> String {
        self.overrides().to_json()
    }

    /// Set `tenant`'s override to `limit` (JSON), as of `at` (ms), unless it is that
    /// already (then nothing is written and it keeps when it was set): `{before, changed}`,
    /// `before` the override it had as JSON or an empty string; `{refused}` (why) when
    /// there are as many overrides as are kept and `tenant` has none.
    ///
    /// # Errors
    /// A limit that does not validate, or storage that refused the write (nothing is
    /// changed then).
    #[wasm_bindgen(js_name = putOverride)]
    pub fn put_override(&mut self, tenant: &str, limit: &str, at: f64) -> Result<JsValue, JsError> {
        let limit = TenantLimit::from_json_text(limit, None)
            .map_err(|e| JsError::new(&format!("{}: {}", e.field, e.message)))?;
        let mut next = self.overrides().clone();
        let answer = js_sys::Object::new();
        let set = |key: &str, value: JsValue| {
            js_sys::Reflect::set(&answer, &key.into(), &value).map(|_| ()).map_err(|e| JsError::new(&describe(&e)))
        };
        match next.put(tenant, limit, at.max(0.0) as u64) {
            Ok((before, changed)) => {
                if changed {
                    self.keep_overrides(next)?;
                }
                set("before", before.map(|o| o.limit.to_json()).unwrap_or_default().into())?;
                set("changed", changed.into())?;
            }
            Err(why) => set("refused", why.into())?,
        }
        Ok(answer.into())
    }

    /// Remove `tenant`'s override: the one removed as JSON, or an empty string when there
    /// was none.
    ///
    /// # Errors
    /// Storage that refused the write (nothing is changed then).
    #[wasm_bindgen(js_name = deleteOverride)]
    pub fn delete_override(&mut self, tenant: &str) -> Result<String, JsError> {
        let mut next = self.overrides().clone();
        let Some(before) = next.remove(tenant) else { return Ok(String::new()) };
        self.keep_overrides(next)?;
        Ok(before.limit.to_json())
    }

    /// Every runtime override of a rule's `enforce`, as stored
    /// (`{"rule": {"enforce": 0.1, "set_at": ms}}`).
    #[wasm_bindgen(js_name = getRuleOverrides)]
    pub fn get_rule_overrides(&mut self) -> String {
        self.rule_overrides().to_json()
    }

    /// Set `rule`'s `enforce` to `enforce` (JSON: `true`, `false` or a fraction), as of `at`
    /// (ms), unless it is that already (then nothing is written), or remove its override
    /// when `enforce` is empty: `{before, changed}`, `before` the override it had (its
    /// `enforce` as JSON) or an empty string; `{refused}` (why) when as many overrides as
    /// are kept exist and `rule` has none. (One method for both: each exported method costs
    /// the Worker its own glue.)
    ///
    /// # Errors
    /// An `enforce` that does not validate, or storage that refused the write (nothing is
    /// changed then).
    #[wasm_bindgen(js_name = setRuleOverride)]
    pub fn set_rule_override(&mut self, rule: &str, enforce: &str, at: f64) -> Result<JsValue, JsError> {
        let enforce = match enforce {
            "" => None,
            text => Some(Enforce::from_json_text(text).map_err(|e| JsError::new(&format!("enforce: {e}")))?),
        };
        let mut next = self.rule_overrides().clone();
        let before = next.get(rule).map(|o| o.enforce);
        let answer = js_sys::Object::new();
        let set = |key: &str, value: JsValue| {
            js_sys::Reflect::set(&answer, &key.into(), &value).map(|_| ()).map_err(|e| JsError::new(&describe(&e)))
        };
        let changed = before != enforce;
        if changed {
            let kept = match enforce {
                Some(enforce) => next.set(rule, RuleOverride { enforce, set_at: at.max(0.0) as u64 }).map(|_| ()),
                None => {
                    next.remove(rule);
                    Ok(())
                }
            };
            if let Err(why) = kept {
                set("refused", why.into())?;
                return Ok(answer.into());
            }
            self.keep_rule_overrides(next)?;
        }
        set("before", before.map(Enforce::to_json).unwrap_or_default().into())?;
        set("changed", changed.into())?;
        Ok(answer.into())
    }

    /// Charge `tenant`'s buckets of `limit` (JSON, as the Worker resolved it) with one
    /// request of `bytes` (`requests` 1), or with `bytes` more of the body of a request
    /// charged before (`requests` 0: a body of no declared length, as it streams): 0 admits,
    /// otherwise the milliseconds to wait. The buckets start afresh when the limit or its
    /// `generation` (when its override was set) changes, so a new override is not held back
    /// by the old limit's debt.
    ///
    /// # Errors
    /// When `limit` is not a valid limit.
    #[wasm_bindgen(js_name = chargeTenant)]
    pub fn charge_tenant(
        &mut self,
        tenant: &str,
        limit: &str,
        generation: f64,
        bytes: f64,
        requests: f64,
        asked_ms: f64,
    ) -> Result<f64, JsError> {
        let bytes = bytes.max(0.0) as u64;
        let what = if requests > 0.0 { Charge::Request(bytes) } else { Charge::More(bytes) };
        let kv = &self.kv;
        let stored = || kv.as_ref()?.get_value(&record_key(tenant)).ok()?.as_string();
        let charged = self
            .tenants
            .charge(tenant, limit, generation.max(0.0) as u64, what, crate::clock::counter_now(asked_ms), stored)
            .map_err(|why| JsError::new(&why))?;
        if let Some(record) = charged.write.then(|| self.tenants.record(tenant)).flatten() {
            self.store_tenant(tenant, &record);
        }
        Ok(match charged.decision {
            Decision::Allow { .. } => 0.0,
            Decision::Deny { retry_after } => retry_after.as_millis_ceil() as f64,
        })
    }

    /// A lease on a slot of fleet budget `upstream` (a positive number), or 0 when none came
    /// free within its `max_wait`. The promise holds no borrow of this object, so calls wait
    /// side by side.
    ///
    /// # Errors
    /// When `upstream` is not a fleet budget of the rules in force.
    #[wasm_bindgen(js_name = acquireSlot)]
    pub fn acquire_slot(&self, upstream: &str) -> Result<js_sys::Promise, JsError> {
        let budget = self.fleet_budget(upstream)?;
        let fleet = self.fleet.clone();
        let future = fleet::acquire(fleet, budget.id, budget.max_in_flight, budget.max_wait, budget.lease);
        Ok(wasm_bindgen_futures::future_to_promise(future))
    }

    /// Keep `lease` of `upstream` for another lease length; `false` when it already ended.
    ///
    /// # Errors
    /// When `upstream` is not a fleet budget of the rules in force.
    #[wasm_bindgen(js_name = renewSlot)]
    pub fn renew_slot(&self, upstream: &str, lease: f64) -> Result<bool, JsError> {
        let budget = self.fleet_budget(upstream)?;
        Ok(fleet::renew(&self.fleet, &budget.id, budget.max_in_flight, lease as u64))
    }

    /// Give `lease` of `upstream` back.
    ///
    /// # Errors
    /// When `upstream` is not a fleet budget of the rules in force.
    #[wasm_bindgen(js_name = releaseSlot)]
    pub fn release_slot(&self, upstream: &str, lease: f64) -> Result<(), JsError> {
        let budget = self.fleet_budget(upstream)?;
        fleet::release(&self.fleet, &budget.id, budget.max_in_flight, lease as u64);
        Ok(())
    }

    /// A leased permit of fleet egress `provider` for a call of `weight` thousandths at a
    /// mirror not in `avoid`: `[permit, mirror]`, or 0 when none started within `wait_ms`
    /// (or it can never start). A permit for the app is sealed with `secret` (32 hex digits,
    /// drawn by the Worker) and given back by it ([`Counter::release_sealed`]); a proxied
    /// call's has none (`""`). The promise holds no borrow of this object.
    ///
    /// # Errors
    /// When `provider` is not a fleet egress provider of the rules in force, or `secret` is
    /// neither empty nor 32 hex digits.
    #[wasm_bindgen(js_name = acquirePermit)]
    pub fn acquire_permit(
        &self,
        provider: &str,
        weight: f64,
        avoid: f64,
        wait_ms: f64,
        secret: &str,
    ) -> Result<js_sys::Promise, JsError> {
        let p = self.fleet_provider(provider)?;
        let secret = match secret {
            "" => None,
            hex => Some(
                sluicegate::egress::permit::secret_from_hex(hex)
                    .ok_or_else(|| JsError::new("a permit's secret is 32 hex digits"))?,
            ),
        };
        let gates = self.egress.clone();
        let deadline = now() + Span::from_millis(wait_ms.clamp(0.0, 600_000.0) as u64);
        let future = async move {
            use sluicegate::egress::gate::Ask;
            let lease = Some(p.lease);
            let grant = match crate::egress::ask(&gates, &p, weight as u64, avoid as u32, lease) {
                Ask::Granted(grant) => Some(grant),
                Ask::Refused(_) => None,
                Ask::Queued(ticket) => crate::egress::wait(&gates, &p, ticket, deadline).await?,
            };
            let grant = match (grant, secret) {
                (Some(g), Some(secret)) if !crate::egress::seal_or_give_back(&gates, &p, g.permit, secret) => None,
                (grant, _) => grant,
            };
            Ok(match grant {
                Some(g) => {
                    js_sys::Array::of2(&JsValue::from_f64(g.permit as f64), &JsValue::from_f64(g.mirror as f64)).into()
                }
                None => JsValue::from_f64(0.0),
            })
        };
        Ok(wasm_bindgen_futures::future_to_promise(future))
    }

    /// Keep egress `permit` another lease; `false` when it already ended.
    ///
    /// # Errors
    /// When `provider` is not a fleet egress provider of the rules in force.
    #[wasm_bindgen(js_name = renewPermit)]
    pub fn renew_permit(&self, provider: &str, permit: f64) -> Result<bool, JsError> {
        let p = self.fleet_provider(provider)?;
        Ok(crate::egress::renew(&self.egress, &p, permit as u64))
    }

    /// Give egress `permit` back (`failed`: its mirror failed); `false` when it was not held.
    ///
    /// # Errors
    /// When `provider` is not a fleet egress provider of the rules in force.
    #[wasm_bindgen(js_name = releasePermit)]
    pub fn release_permit(&self, provider: &str, permit: f64, failed: bool) -> Result<bool, JsError> {
        let p = self.fleet_provider(provider)?;
        Ok(crate::egress::finish(&self.egress, &p, permit as u64, failed))
    }

    /// Give back the permit of fleet egress `provider` sealed with `secret` (`failed`: its
    /// mirror failed); `false` when no held permit was sealed with it.
    ///
    /// # Errors
    /// When `provider` is not a fleet egress provider of the rules in force.
    #[wasm_bindgen(js_name = releaseSealed)]
    pub fn release_sealed(&self, provider: &str, secret: &str, failed: bool) -> Result<bool, JsError> {
        let p = self.fleet_provider(provider)?;
        let Some(secret) = sluicegate::egress::permit::secret_from_hex(secret) else { return Ok(false) };
        Ok(crate::egress::finish_sealed(&self.egress, &p, secret, failed))
    }

    /// Count one request of `key` under rule `rule_id`, at this object's clock:
    /// `[allowed (1 or 0), remaining, wait_ms]`, where `wait_ms` is the reset for an allow
    /// and the retry-after for a refusal.
    ///
    /// # Errors
    /// When the rule is unknown (the Worker and this object disagree about the rules) or
    /// the configuration is invalid.
    pub fn check(&mut self, rule_id: &str, key: &str, asked_ms: f64) -> Result<Vec<f64>, JsError> {
        let now = crate::clock::counter_now(asked_ms);
        let setup = self.config.as_ref().as_ref().map_err(|e| JsError::new(&format!("invalid configuration: {e}")))?;
        let rule = setup.rules.get(rule_id).ok_or_else(|| JsError::new(&format!("unknown rule \"{rule_id}\"")))?;
        let stored = if self.limiters.is_new(rule, key) {
            Stored {
                block: self.stored_block(key),
                count: if rule.keeps_state() { self.stored_count(key) } else { None },
            }
        } else {
            Stored::default()
        };
        let counted = self.limiters.check(rule, key, now, stored).map_err(|e| JsError::new(&e.to_string()))?;
        if let Some(until) = counted.block_started {
            self.store_block(rule, key, until);
        }
        if let Some(count) = &counted.count {
            self.store_count(rule, key, count);
        }
        let decision = counted.decision;
        // The fourth number is this object's clock when it decided (ms): what the development
        // build reports in `Sluicegate-Clock`.
        let at = now.as_millis() as f64;
        Ok(match decision {
            Decision::Allow { remaining, reset } => vec![1.0, remaining as f64, reset.as_millis_ceil() as f64, at],
            Decision::Deny { retry_after } => vec![0.0, 0.0, retry_after.as_millis_ceil() as f64, at],
        })
    }
}

/// A stored document's reader: what it holds, and the entries that no longer validate.
type Reader<T> = fn(&str) -> Result<(T, Vec<String>), String>;

/// What `kv` stores under `key` (`what`, in a log line), read by `read`: the entries that no
/// longer validate left out and logged, nothing when it cannot be read at all (logged too).
fn stored<T: Default>(kv: Option<&js::SyncKv>, key: &str, what: &str, read: Reader<T>) -> T {
    let text = kv.and_then(|kv| kv.get_value(key).ok()).and_then(|v| v.as_string());
    match text.map(|text| read(&text)) {
        Some(Ok((found, dropped))) => {
            if !dropped.is_empty() {
                log_error(&format!("sluicegate: stored {what} no longer valid, left out: {}", dropped.join(", ")));
            }
            found
        }
        Some(Err(e)) => {
            log_error(&format!("sluicegate: the stored {what} cannot be read: {e}"));
            T::default()
        }
        None => T::default(),
    }
}

/// Write `json` (`what`, in an error) under `key` in `kv`.
///
/// # Errors
/// No storage, or storage that refused the write (what was there is kept).
fn store(kv: Option<&js::SyncKv>, key: &str, what: &str, json: &str) -> Result<(), JsError> {
    let kv = kv.ok_or_else(|| JsError::new(&format!("this object has no storage for {what}")))?;
    kv.put(key, &JsValue::from_str(json))
        .map_err(|e| JsError::new(&format!("the {what} could not be stored: {}", describe(&e))))
}

impl Counter {
    fn overrides(&mut self) -> &Overrides {
        if self.overrides.is_none() {
            self.overrides = Some(stored(self.kv.as_ref(), OVERRIDES_KEY, "overrides", Overrides::from_json));
        }
        self.overrides.get_or_insert_with(Overrides::default)
    }

    fn rule_overrides(&mut self) -> &RuleOverrides {
        if self.rule_overrides.is_none() {
            let loaded = stored(self.kv.as_ref(), RULE_OVERRIDES_KEY, "rule overrides", RuleOverrides::from_json);
            self.rule_overrides = Some(loaded);
        }
        self.rule_overrides.get_or_insert_with(RuleOverrides::default)
    }

    /// Store `next` and keep it; a refused write keeps what was there.
    fn keep_rule_overrides(&mut self, next: RuleOverrides) -> Result<(), JsError> {
        store(self.kv.as_ref(), RULE_OVERRIDES_KEY, "rule overrides", &next.to_json())?;
        self.rule_overrides = Some(next);
        Ok(())
    }

    /// The stats, read from storage (the retention's minutes) on first use.
    fn stats(&mut self) -> &mut Minutes {
        if self.stats.is_none() {
            let mut minutes = Minutes::default();
            if let Some(kv) = &self.kv {
                let mut minute = Minutes::oldest_kept(js_sys::Date::now() as u64);
                for _ in 0..=RETENTION_MINUTES {
                    let stored = kv.get_value(&format!("{STATS_KEY}{minute}")).ok().and_then(|v| v.as_string());
                    if let Some(Err(e)) = stored.map(|json| minutes.load_minute(minute, &json)) {
                        log_error(&format!("sluicegate: a stored stats minute cannot be read, left out: {e}"));
                    }
                    minute += MINUTE_MS;
                }
            }
            self.stats = Some(minutes);
        }
        self.stats.get_or_insert_with(Minutes::default)
    }

    fn keep_overrides(&mut self, next: Overrides) -> Result<(), JsError> {
        store(self.kv.as_ref(), OVERRIDES_KEY, "overrides", &next.to_json())?;
        self.overrides = Some(next);
        Ok(())
    }

    fn fleet_budget(&self, upstream: &str) -> Result<Upstream, JsError> {
        let setup = self.config.as_ref().as_ref().map_err(|e| JsError::new(&format!("invalid configuration: {e}")))?;
        setup
            .rules
            .upstreams()
            .iter()
            .find(|u| u.id == upstream && u.scope == BudgetScope::Fleet)
            .cloned()
            .ok_or_else(|| JsError::new(&format!("no fleet upstream budget \"{upstream}\"")))
    }

    fn fleet_provider(&self, provider: &str) -> Result<sluicegate::egress::Provider, JsError> {
        let setup = self.config.as_ref().as_ref().map_err(|e| JsError::new(&format!("invalid configuration: {e}")))?;
        setup
            .rules
            .egress()
            .and_then(|e| e.providers.iter().find(|p| p.id == provider && p.scope == BudgetScope::Fleet))
            .cloned()
            .ok_or_else(|| JsError::new(&format!("no fleet egress provider \"{provider}\"")))
    }

    /// Write `tenant`'s buckets down; a failed write keeps them in memory and is logged.
    fn store_tenant(&self, tenant: &str, record: &str) {
        if let Some(kv) = &self.kv {
            if let Err(e) = kv.put(&record_key(tenant), &JsValue::from_str(record)) {
                log_error(&format!(
                    "{{\"sluicegate\":\"store-failure\",\"tenant\":{},\"error\":{}}}",
                    crate::log::json_string(tenant),
                    crate::log::json_string(&format!(
                        "the tenant's buckets could not be written down: {}",
                        describe(&e)
                    ))
                ));
            }
        }
    }

    /// The end of the block stored for `key`, if it is stored and readable.
    fn stored_block(&self, key: &str) -> Option<Instant> {
        let value = self.kv.as_ref()?.get_value(key).ok()?;
        let ms = value.as_f64().filter(|ms| ms.is_finite() && *ms > 0.0)?;
        Some(Instant::from_millis(ms as u64))
    }

    /// The count stored for `key` (a long rule's, see [`Rule::keeps_state`]).
    fn stored_count(&self, key: &str) -> Option<Vec<u8>> {
        let value = self.kv.as_ref()?.get_value(&count_key(key)).ok()?;
        value.is_object().then(|| js_sys::Uint8Array::new(&value).to_vec())
    }

    /// Write `key`'s count (of `rule`); a failed write keeps it in memory and is logged.
    fn store_count(&self, rule: &Rule, key: &str, bytes: &[u8]) {
        if let Some(kv) = &self.kv {
            if let Err(e) = kv.put(&count_key(key), &js_sys::Uint8Array::from(bytes).into()) {
                let key = self.logged(rule, key);
                log_error(&format!("sluicegate: could not store the count of {key}: {}", describe(&e)));
            }
        }
    }

    /// Remember that `key` (of `rule`) is blocked until `until` (epoch milliseconds). A failed
    /// write keeps the block in memory and is logged.
    fn store_block(&self, rule: &Rule, key: &str, until: Instant) {
        if let Some(kv) = &self.kv {
            if let Err(e) = kv.put(key, &JsValue::from_f64(until.as_millis() as f64)) {
                let key = self.logged(rule, key);
                log_error(&format!("sluicegate: could not store the block of {key}: {}", describe(&e)));
            }
        }
    }

    /// `key` as a log line shows it. This object has the key, not the request it came from,
    /// so the key of a rule that counts by a header is shown as the rule id and the whole
    /// key's keyed hash (`per-token|#3f9a…`): a header value never appears.
    fn logged(&self, rule: &Rule, key: &str) -> String {
        if rule.characteristics.iter().any(|c| matches!(c, Characteristic::Header(_))) {
            format!("{}|{}", rule.id, crate::log::log_hash(&self.env).tag(key))
        } else {
            key.to_owned()
        }
    }
}

/// Where a key's count is stored, beside its block (stored under the key itself).
fn count_key(key: &str) -> String {
    format!("count\u{1f}{key}")
}
