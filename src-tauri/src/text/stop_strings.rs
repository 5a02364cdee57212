//! Cutting generated text at user-given stop strings.
//!
//! Text that might be the start of a stop string is held back until the next
//! piece shows whether it is, so a stop string split across tokens is still
//! found and never shown.

pub struct StopStrings {
    stops: Vec<String>,
    pending: String,
}

/// What to show after a piece of text arrived.
#[derive(Debug, PartialEq, Eq)]
pub struct StopCheck {
    /// Text that is safe to show now.
    pub emit: String,
    /// A stop string was found; generation should end.
    pub stopped: bool,
}

impl StopStrings {
    pub fn new(stops: &[String]) -> Self {
        Self { stops: stops.iter().filter(|s| !s.is_empty()).cloned().collect(), pending: String::new() }
    }

    /// Feeds a piece of text.
    pub fn push(&mut self, text: &str) -> StopCheck {
        self.pending.push_str(text);
        let earliest = self.stops.iter().filter_map(|s| self.pending.find(s.as_str())).min();
        if let Some(pos) = earliest {
            let emit = self.pending[..pos].to_string();
            self.pending.clear();
            return StopCheck { emit, stopped: true };
        }
        let keep = self.held_back_len();
        let split = self.pending.len() - keep;
        let emit = self.pending[..split].to_string();
        self.pending.drain(..split);
        StopCheck { emit, stopped: false }
    }

    /// Length of the longest suffix of `pending` that begins some stop string.
    fn held_back_len(&self) -> usize {
        let p = &self.pending;
        (1..=p.len())
            .rev()
            .filter(|&n| p.is_char_boundary(p.len() - n))
            .find(|&n| self.stops.iter().any(|s| s.starts_with(&p[p.len() - n..])))
            .unwrap_or(0)
    }

    /// Releases held-back text at the end of generation.
    pub fn finish(&mut self) -> String {
        std::mem::take(&mut self.pending)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_string_split_across_pieces_is_found_and_hidden() {
        let mut s = StopStrings::new(&["END".to_string()]);
        let mut shown = String::new();
        for piece in ["Hello E", "N", "D and more"] {
            let check = s.push(piece);
            shown.push_str(&check.emit);
            if check.stopped {
                assert_eq!(shown, "Hello ");
                return;
            }
        }
        panic!("stop string not found; shown {shown:?}");
    }

    #[test]
    fn false_start_is_released() {
        let mut s = StopStrings::new(&["END".to_string()]);
        assert_eq!(s.push("an E").emit, "an ");
        assert_eq!(s.push("gg").emit, "Egg");
        assert_eq!(s.finish(), "");
    }

    #[test]
    fn multibyte_text_is_never_split() {
        let mut s = StopStrings::new(&["é!".to_string()]);
        let check = s.push("café");
        assert_eq!(check.emit, "caf");
        assert_eq!(s.finish(), "é");
    }
}
