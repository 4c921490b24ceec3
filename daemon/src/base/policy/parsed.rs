//! What the policy found in the texts it read lately. It depends on the text alone, and agents
//! run the same commands again and again (a test suite, `git status`): the parse is most of a
//! policy check, so a text read again is not parsed again.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use super::walk::{collect_now, Collected};

/// Texts whose commands are kept (the parse is 10–15 µs of a spawn).
const PARSED_MAX: usize = 64;
/// Longer texts are parsed each time: few are run twice, and the cache stays small.
const PARSED_TEXT_MAX: usize = 4096;

/// The last texts parsed (what [`collect`] finds depends on the text alone).
static PARSED: Parsed = Parsed::new(PARSED_MAX);

/// Texts and what was found in them, at most `max`, the oldest going first.
struct Parsed {
    max: usize,
    texts: Mutex<ParsedTexts>,
}

struct ParsedTexts {
    order: VecDeque<Arc<str>>,
    found: Option<HashMap<Arc<str>, Arc<Collected>>>,
}

impl Parsed {
    const fn new(max: usize) -> Parsed {
        Parsed {
            max,
            texts: Mutex::new(ParsedTexts {
                order: VecDeque::new(),
                found: None,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ParsedTexts> {
        // Plain data: a panic cannot leave it inconsistent.
        self.texts.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn get(&self, text: &str, parse: impl FnOnce(&str) -> Collected) -> Arc<Collected> {
        if let Some(found) = self.lock().found.as_ref().and_then(|m| m.get(text)) {
            return found.clone();
        }
        // Parsed outside the lock: another spawn must not wait for this one's parse.
        let found = Arc::new(parse(text));
        if text.len() <= PARSED_TEXT_MAX {
            let mut p = self.lock();
            let key: Arc<str> = Arc::from(text);
            let map = p.found.get_or_insert_with(HashMap::new);
            if map.insert(key.clone(), found.clone()).is_none() {
                p.order.push_back(key);
            }
            while p.order.len() > self.max {
                if let (Some(old), Some(map)) = (p.order.pop_front(), p.found.as_mut()) {
                    map.remove(&old);
                }
            }
        }
        found
    }
}

/// Collects the simple commands of `text`. A syntax error anywhere (also inside a `sh -c`
/// string or a substitution) is an error carrying the parser's message. A text parsed lately
/// is not parsed again.
pub fn collect(text: &str) -> Arc<Collected> {
    PARSED.get(text, collect_now)
}

#[cfg(test)]
mod parsed_tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_text_parsed_lately_is_not_parsed_again_and_the_oldest_go_first() {
        let parsed = Parsed::new(2);
        let parses = std::cell::Cell::new(0);
        let parse = |t: &str| {
            parses.set(parses.get() + 1);
            collect_now(t)
        };
        let first = parsed.get("echo a | wc", parse);
        assert_eq!(*first, collect_now("echo a | wc"));
        assert!(Arc::ptr_eq(&first, &parsed.get("echo a | wc", parse)));
        assert_eq!(parses.get(), 1);
        // An error is kept as well.
        let bad = parsed.get("echo (", parse);
        assert!(bad.is_err());
        parsed.get("echo (", parse);
        assert_eq!(parses.get(), 2);
        // A third text: the oldest goes.
        parsed.get("ls", parse);
        parsed.get("echo a | wc", parse);
        assert_eq!(parses.get(), 4);
        // A long text is parsed each time.
        let long = format!("echo {}", "x".repeat(PARSED_TEXT_MAX));
        parsed.get(&long, parse);
        parsed.get(&long, parse);
        assert_eq!(parses.get(), 6);
    }
}
