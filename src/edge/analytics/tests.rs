use super::*;
use alloc::format;
use alloc::string::ToString;

const T0: u64 = 1_780_000_020_000; // 20 s into a minute

fn burst(recorder: &mut Recorder, at: u64, admitted: u32, refused: u32, who: &str) {
    for i in 0..admitted + refused {
        let outcome = if i < admitted { Outcome::Admitted } else { Outcome::Refused };
        recorder.record(at + u64::from(i), Kind::Rule, "api", outcome, Some(who));
    }
}

fn rule<'a>(stats: &'a Stats, name: &str) -> &'a SubjectStats {
    stats.subjects.iter().find(|s| s.kind == Kind::Rule && s.name == name).expect("the rule has stats")
}

#[test]
fn a_decision_is_one_data_point_of_kind_name_outcome_and_colo() {
    let point = data_point(Kind::Rule, "api", Outcome::Refused, "AMS", crate::core::time::Span::from_millis(9_500));
    assert_eq!(point, DataPoint { blobs: ["rule", "api", "refused", "AMS"], doubles: [1.0, 9.5] });
    let shed = data_point(Kind::Budget, "search", Outcome::Shed, "", crate::core::time::Span::ZERO);
    assert_eq!((shed.blobs[2], shed.doubles), ("shed", [1.0, 0.0]));
    assert_eq!(Outcome::FailedOpen.name(), "failed_open");
}

#[test]
fn a_burst_is_counted_exactly_per_minute_with_its_refused_identity() {
    let mut recorder = Recorder::default();
    burst(&mut recorder, T0, 20, 5, "203.0.113.7");
    let mut store = Minutes::default();
    assert_eq!(store.merge(&recorder.take(), T0 + 100), [minute_of(T0)]);
    assert!(recorder.is_empty());
    let stats = store.query(T0 - MINUTE_MS, T0 + MINUTE_MS, None);
    let api = rule(&stats, "api");
    assert_eq!(api.minutes.len(), 1);
    let m = &api.minutes[0];
    assert_eq!((m.minute, m.admitted, m.refused, m.failed_open, m.shed), (minute_of(T0), 20, 5, 0, 0));
    assert_eq!(m.top_refused, [Hitter { identity: "203.0.113.7".into(), count: 5, error: 0 }]);
    assert_eq!((api.total.admitted, api.total.refused), (20, 5));
}

#[test]
fn decisions_either_side_of_a_minute_land_in_their_own_minutes_and_batches_add_up() {
    let mut store = Minutes::default();
    let next = minute_of(T0) + MINUTE_MS;
    for (at, admitted, refused) in [(next - 10, 3, 1), (next, 4, 2), (next + 5, 1, 0)] {
        let mut recorder = Recorder::default();
        burst(&mut recorder, at, admitted, refused, "198.51.100.1");
        store.merge(&recorder.take(), next + 10);
    }
    let api = rule(&store.query(T0, next + MINUTE_MS, None), "api").clone();
    let counts: Vec<(u64, u64, u64)> = api.minutes.iter().map(|m| (m.minute, m.admitted, m.refused)).collect();
    assert_eq!(counts, [(minute_of(T0), 3, 1), (next, 5, 2)]);
    assert_eq!(api.total.refused, 3);
    assert_eq!(api.total.top_refused[0].count, 3);
}

#[test]
fn every_outcome_and_kind_is_counted_and_a_query_can_name_one_subject() {
    let mut r = Recorder::default();
    r.record(T0, Kind::Rule, "api", Outcome::FailedOpen, Some("a"));
    r.record(T0, Kind::Tenant, "acme", Outcome::Refused, Some("acme"));
    r.record(T0, Kind::Budget, "search", Outcome::Shed, Some("b"));
    r.record(T0, Kind::PreRead, "address", Outcome::Refused, Some("c"));
    let mut store = Minutes::default();
    store.merge(&r.take(), T0);
    let all = store.query(T0, T0, None);
    let seen: Vec<(&str, &str, u64)> =
        all.subjects.iter().map(|s| (s.kind.name(), s.name.as_str(), s.total.decisions())).collect();
    assert_eq!(seen, [("rule", "api", 1), ("tenant", "acme", 1), ("budget", "search", 1), ("pre_read", "address", 1)]);
    assert_eq!(rule(&all, "api").total.failed_open, 1);
    let one = store.query(T0, T0, Some("acme"));
    assert_eq!(one.subjects.len(), 1);
    assert_eq!(one.subjects[0].total.refused, 1);
    // the shapes the stats answer has
    let json = all.to_json();
    for field in [
        r#""kind":"pre_read""#,
        r#""failed_open":1"#,
        r#""shed":1"#,
        r#""retention_minutes":1440"#,
        r#""minute_ms":60000"#,
    ] {
        assert!(json.contains(field), "{field} in {json}");
    }
}

impl MinuteStats {
    fn decisions(&self) -> u64 {
        self.admitted + self.refused + self.failed_open + self.shed + self.would_refuse
    }
}

#[test]
fn a_flood_of_invented_identities_keeps_the_sketch_bounded_and_the_heavy_hitter_on_top() {
    let mut tally = Tally::default();
    for i in 0..100_000u32 {
        tally.add(Outcome::Refused, Some(&format!("2001:db8:{i:x}::/64")));
        if i % 10 == 0 {
            tally.add(Outcome::Refused, Some("203.0.113.66"));
        }
    }
    assert!(tally.top_refused.len() <= SKETCH_SIZE);
    let top = tally.top_refused.top(TOP_SHOWN);
    assert_eq!(top[0].identity, "203.0.113.66");
    // its count may overstate by its error, never understate
    assert!(top[0].count >= 10_000 && top[0].count - top[0].error <= 10_000, "{:?}", top[0]);
    assert_eq!(tally.refused, 110_000);
}

#[test]
fn a_recorder_past_its_subjects_counts_the_rest_together_and_loses_nothing_it_counts() {
    let mut r = Recorder::default();
    for i in 0..10_000u32 {
        r.record(T0, Kind::Tenant, &format!("tenant-{i}"), Outcome::Admitted, None);
    }
    assert!(r.subjects() <= MAX_SUBJECTS + 8, "{}", r.subjects());
    let batch = r.take();
    assert_eq!(batch.decisions() + batch.lost, 10_000);
    let other = batch.rows.iter().find(|row| row.name == OTHER).expect("an (other) row");
    assert_eq!(other.tally.admitted, 10_000 - MAX_SUBJECTS as u64);
    // and a store past its subjects per minute does the same
    let mut store = Minutes::default();
    for i in 0..1_000u32 {
        let mut r = Recorder::default();
        r.record(T0, Kind::Tenant, &format!("t{i}"), Outcome::Refused, Some("x"));
        store.merge(&r.take(), T0);
    }
    let stats = store.query(T0, T0, None);
    assert!(stats.subjects.len() <= MAX_SUBJECTS + 4);
    assert_eq!(stats.subjects.iter().map(|s| s.total.refused).sum::<u64>() + stats.lost, 1_000);
}

#[test]
fn a_batch_is_due_after_five_seconds_or_a_thousand_decisions() {
    let mut r = Recorder::default();
    assert!(!r.due(T0));
    r.record(T0, Kind::Rule, "api", Outcome::Admitted, None);
    assert!(!r.due(T0 + FLUSH_MS - 1));
    assert!(r.due(T0 + FLUSH_MS));
    r.take();
    for i in 0..FLUSH_DECISIONS {
        assert!(!r.due(T0 + 10), "due after {i}");
        r.record(T0 + 10, Kind::Rule, "api", Outcome::Admitted, None);
    }
    assert!(r.due(T0 + 10));
}

#[test]
fn a_batch_that_could_not_be_delivered_goes_with_the_next_one() {
    let mut r = Recorder::default();
    burst(&mut r, T0, 2, 1, "a");
    let failed = r.take();
    burst(&mut r, T0 + 1_000, 3, 2, "a");
    r.restore(&failed, T0 + 2_000);
    let batch = r.take();
    assert_eq!(batch.rows.len(), 1);
    assert_eq!((batch.rows[0].tally.admitted, batch.rows[0].tally.refused), (5, 3));
    assert_eq!(batch.rows[0].tally.top_refused.top(1)[0].count, 3);
}

#[test]
fn the_store_keeps_24_hours_and_counts_older_or_future_rows_as_lost() {
    let mut store = Minutes::default();
    let mut r = Recorder::default();
    burst(&mut r, T0, 1, 0, "a");
    store.merge(&r.take(), T0);
    let day = RETENTION_MINUTES * MINUTE_MS;
    assert!(store.prune(T0 + day - MINUTE_MS).is_empty());
    assert_eq!(store.prune(T0 + day), [minute_of(T0)]);
    assert!(store.is_empty());
    // a row from before the retention, or from the future, is not kept
    let mut r = Recorder::default();
    burst(&mut r, T0, 2, 0, "a");
    burst(&mut r, T0 + day + 10 * MINUTE_MS, 3, 0, "a");
    assert!(store.merge(&r.take(), T0 + day).is_empty());
    assert_eq!(store.lost(), 5);
    assert!(store.is_empty());
}

#[test]
fn a_minute_written_down_reads_back_the_same() {
    let mut store = Minutes::default();
    let mut r = Recorder::default();
    burst(&mut r, T0, 20, 5, "203.0.113.7");
    r.record(T0, Kind::Budget, "search", Outcome::Shed, None);
    let changed = store.merge(&r.take(), T0);
    let mut again = Minutes::default();
    for minute in changed {
        again.load_minute(minute, &store.minute_json(minute).unwrap()).unwrap();
    }
    assert_eq!(again.query(T0, T0, None), store.query(T0, T0, None));
    assert!(again.load_minute(0, "{\"rows\":7}").unwrap_err().contains("minute 0"));
}

#[test]
fn batches_cross_as_json_and_a_bad_one_is_refused_by_name() {
    let mut r = Recorder::default();
    burst(&mut r, T0, 1, 1, "é".repeat(100).as_str());
    let batch = r.take();
    let back = Batch::from_json(&batch.to_json()).unwrap();
    assert_eq!(back, batch);
    // a long identity is cut at a character boundary
    let kept = &back.rows[0].tally.top_refused.top(1)[0].identity;
    assert!(kept.len() <= IDENTITY_BYTES && kept.chars().all(|c| c == 'é'));
    assert!(Batch::from_json("{\"rows\":[{\"minute\":\"x\"}]}").unwrap_err().starts_with("not a stats batch"));
    assert_eq!(Kind::PreRead.name(), "pre_read");
    assert_eq!(OTHER.to_string(), "(other)");
}

#[test]
fn an_answer_names_at_most_its_bound_of_subjects_and_counts_the_rest_together() {
    let mut store = Minutes::default();
    // 400 tenants over seven minutes (64 named a minute), each refused once as "x"
    for i in 0..400u64 {
        let mut r = Recorder::default();
        r.record(T0 + (i / 60) * MINUTE_MS, Kind::Tenant, &format!("t{i:03}"), Outcome::Refused, Some("x"));
        store.merge(&r.take(), T0 + 7 * MINUTE_MS);
    }
    let stats = store.query(T0, T0 + 7 * MINUTE_MS, None);
    let named = stats.subjects.iter().filter(|s| s.name != OTHER).count();
    assert_eq!(named, MAX_ANSWERED);
    assert_eq!(stats.subjects.iter().map(|s| s.total.refused).sum::<u64>(), 400);
    let other = stats.subjects.iter().find(|s| s.name == OTHER).unwrap();
    assert_eq!(other.total.top_refused, [Hitter { identity: "x".into(), count: 400 - MAX_ANSWERED as u64, error: 0 }]);
    // in order of kind and name
    let names: Vec<&str> = stats.subjects.iter().map(|s| s.name.as_str()).collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(names, sorted);
}

#[test]
fn the_worst_minute_fits_one_durable_object_value() {
    // Every subject a minute names, each refusing 100,000 invented identities of the longest
    // length kept: the minute is bounded, and its JSON fits one storage value (128 KiB).
    let mut store = Minutes::default();
    let mut r = Recorder::default();
    for i in 0..100_000u32 {
        let identity = format!("{i:064}");
        r.record(T0, Kind::Tenant, &format!("tenant-{:02}", i % 80), Outcome::Refused, Some(&identity));
        if r.due(T0) {
            store.merge(&r.take(), T0);
        }
    }
    store.merge(&r.take(), T0);
    let json = store.minute_json(minute_of(T0)).unwrap();
    assert!(json.len() < 128 * 1024, "{} bytes", json.len());
    let stats = store.query(T0, T0, None);
    assert!(stats.subjects.len() <= MAX_SUBJECTS + 1, "{}", stats.subjects.len());
    assert!(stats.subjects.iter().all(|s| s.total.top_refused.len() <= TOP_SHOWN));
    assert_eq!(stats.subjects.iter().map(|s| s.total.refused).sum::<u64>() + stats.lost, 100_000);
}

#[test]
fn a_shadow_refusal_is_counted_as_would_refuse_never_as_refused_nor_among_the_refused() {
    let mut r = Recorder::default();
    burst(&mut r, T0, 5, 2, "203.0.113.7");
    for i in 0..3 {
        r.record(T0 + 10 + i, Kind::Rule, "api", Outcome::WouldRefuse, Some("198.51.100.9"));
    }
    let batch = Batch::from_json(&r.take().to_json()).unwrap();
    let mut store = Minutes::default();
    store.merge(&batch, T0);
    let stats = store.query(T0, T0, None);
    let api = rule(&stats, "api");
    let m = &api.minutes[0];
    assert_eq!((m.admitted, m.refused, m.would_refuse), (5, 2, 3));
    assert_eq!(api.total.would_refuse, 3);
    assert_eq!(api.total.top_refused, [Hitter { identity: "203.0.113.7".into(), count: 2, error: 0 }]);
    let json = stats.to_json();
    assert!(json.contains(r#""shed":0,"would_refuse":3,"top_refused""#), "{json}");
    let point = data_point(Kind::Rule, "api", Outcome::WouldRefuse, "AMS", crate::core::time::Span::from_millis(7_000));
    assert_eq!(point, DataPoint { blobs: ["rule", "api", "would_refuse", "AMS"], doubles: [1.0, 7.0] });
    // and it survives the minute being written down and read back
    let mut again = Minutes::default();
    again.load_minute(minute_of(T0), &store.minute_json(minute_of(T0)).unwrap()).unwrap();
    assert_eq!(rule(&again.query(T0, T0, None), "api").total.would_refuse, 3);
}

#[test]
fn minutes_and_batches_written_before_would_refuse_was_counted_still_read() {
    // a minute as stored before: seven cells a row
    let stored = r#"[["rule","api",20,5,1,0,[["203.0.113.7",5,0]]],["budget","search",3,0,0,2,[]]]"#;
    let mut store = Minutes::default();
    store.load_minute(minute_of(T0), stored).unwrap();
    let stats = store.query(T0, T0, None);
    let api = rule(&stats, "api");
    assert_eq!((api.total.admitted, api.total.refused, api.total.failed_open, api.total.would_refuse), (20, 5, 1, 0));
    assert_eq!(api.total.top_refused[0].count, 5);
    // written down again, it keeps every count
    let mut again = Minutes::default();
    again.load_minute(minute_of(T0), &store.minute_json(minute_of(T0)).unwrap()).unwrap();
    assert_eq!(again.query(T0, T0, None), stats);
    // a batch from an isolate that runs the code from before (eight cells a row)
    let old = format!(r#"{{"lost":1,"rows":[[{},"rule","api",2,1,0,0,[["a",1,0]]]]}}"#, minute_of(T0));
    let batch = Batch::from_json(&old).unwrap();
    assert_eq!((batch.lost, batch.rows[0].tally.refused, batch.rows[0].tally.would_refuse), (1, 1, 0));
    // a row of another length is still refused
    assert!(store.load_minute(0, r#"[["rule","api",1,2,3,4,[],5,6]]"#).is_err());
}
