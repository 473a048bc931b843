//! Properties of the path normalisation rules match against: every spelling of a path that
//! a router would route to the same handler normalises to one path.
#![cfg(not(target_arch = "wasm32"))]

use proptest::prelude::*;
use sluicegate::rules::normalise_path;

/// A path of 1–6 segments of letters, digits and `-._~`, possibly ending in `/`.
fn plain_path() -> impl Strategy<Value = String> {
    (prop::collection::vec("[A-Za-z0-9_~-][A-Za-z0-9._~-]{0,7}", 1..6), any::<bool>()).prop_map(|(segments, slash)| {
        let segments: Vec<String> = segments.into_iter().filter(|s| s != "." && s != "..").collect();
        let mut path = format!("/{}", segments.join("/"));
        if slash && path.len() > 1 {
            path.push('/');
        }
        path
    })
}

/// `path` respelled: each byte escaped (either hex case) or not, each `/` doubled, escaped
/// or preceded by a `./` or a `x/../` detour, as the choices say.
fn respell(path: &str, choices: &[u8]) -> String {
    let mut out = String::new();
    for (i, b) in path.bytes().enumerate() {
        let choice = choices[i % choices.len()];
        match (b, choice % 6) {
            (b'/', 1) => out.push_str("//"),
            (b'/', 2) => out.push_str("%2F"),
            (b'/', 3) if i > 0 => out.push_str("/./"),
            (b'/', 4) if i > 0 => out.push_str("/zz/../"),
            (b'/', _) => out.push('/'),
            (_, 1) => out.push_str(&format!("%{b:02X}")),
            (_, 2) => out.push_str(&format!("%{b:02x}")),
            _ => out.push(char::from(b)),
        }
    }
    out
}

/// `path` with `;` and a parameter after each segment (each run of bytes between raw `/`s)
/// whose choice says so, the empty ones before the first `/` and after a trailing `/`
/// included. A parameter holds anything but a
/// raw `/` or `\`: more `;`, `=`, `,`, dots, and escapes (`%2F` too).
fn with_parameters(path: &str, params: &[(bool, String)]) -> String {
    let mut out = String::new();
    for (i, segment) in path.split('/').enumerate() {
        if i > 0 {
            out.push('/');
        }
        out.push_str(segment);
        let (insert, param) = &params[i % params.len()];
        if *insert {
            out.push(';');
            out.push_str(param);
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn inserting_path_parameters_after_any_segment_leaves_the_normal_form_unchanged(
        path in plain_path(),
        params in prop::collection::vec((any::<bool>(), "([A-Za-z0-9=,;._~-]|%2[Ff]|%3[Bb]|%41|\\.\\.){0,6}"), 1..8),
        choices in prop::collection::vec(any::<u8>(), 1..16),
    ) {
        let expected = normalise_path(&path).unwrap().into_owned();
        let sent = with_parameters(&path, &params);
        prop_assert_eq!(normalise_path(&sent).unwrap(), expected.as_str(), "{}", sent);
        // Respelled as well (escapes, doubled slashes, dot segments): still the same path.
        let respelled = with_parameters(&respell(&path, &choices), &params);
        prop_assert_eq!(normalise_path(&respelled).unwrap(), expected.as_str(), "{}", respelled);
    }

    #[test]
    fn every_respelling_of_a_path_normalises_to_the_path(
        path in plain_path(),
        choices in prop::collection::vec(any::<u8>(), 1..16),
    ) {
        let respelled = respell(&path, &choices);
        let expected = normalise_path(&path).unwrap().into_owned();
        prop_assert_eq!(normalise_path(&respelled).unwrap(), expected.as_str(), "{}", respelled);
    }

    #[test]
    fn normalising_is_idempotent_and_its_output_is_borrowed_when_normalised_again(path in "[ -~\u{e9}\u{4e2d}]{0,40}") {
        if let Ok(once) = normalise_path(&path) {
            prop_assert!(once.starts_with('/'));
            prop_assert!(once.is_ascii());
            let twice = normalise_path(&once).unwrap();
            prop_assert_eq!(&*twice, &*once);
            prop_assert!(matches!(twice, std::borrow::Cow::Borrowed(_)), "{} was not recognised as normal", once);
            prop_assert!(!once.contains("//") && !once.contains("/./") && !once.contains("/../"));
        }
    }
}
