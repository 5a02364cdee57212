//! `tokens.txt`: one `symbol<TAB>id` per line, the phoneme (and pinyin)
//! symbols the model was trained on; `_` is the padding symbol.

use anyhow::{bail, Context, Result};
use std::collections::HashMap;
use std::path::Path;

/// The most symbols a table may hold (the released one has a few hundred).
const MAX_SYMBOLS: usize = 1 << 16;

#[derive(Debug, Clone)]
pub struct TokenTable {
    ids: HashMap<String, u32>,
    pub pad_id: u32,
}

impl TokenTable {
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
        Self::parse(&text).with_context(|| format!("{}: not a token table", path.display()))
    }

    pub fn parse(text: &str) -> Result<Self> {
        let mut ids = HashMap::new();
        for (number, line) in text.lines().enumerate() {
            let line = line.trim_end();
            let Some((symbol, id)) = line.rsplit_once('\t') else {
                bail!("line {}: `{line}` is not `symbol<TAB>id`", number + 1);
            };
            let id: u32 = id.parse().with_context(|| format!("line {}: `{id}` is not an id", number + 1))?;
            if ids.insert(symbol.to_string(), id).is_some() {
                bail!("line {}: symbol `{symbol}` appears twice", number + 1);
            }
            if ids.len() > MAX_SYMBOLS {
                bail!("more than {MAX_SYMBOLS} symbols");
            }
        }
        let vocabulary = ids.len();
        if let Some((symbol, id)) = ids.iter().find(|(_, &id)| id as usize >= vocabulary) {
            bail!("symbol `{symbol}` has id {id}, beyond the table's {vocabulary} symbols");
        }
        let pad_id = *ids.get("_").context("it has no padding symbol `_`")?;
        Ok(Self { ids, pad_id })
    }

    /// How many symbols (the embedding's rows).
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    pub fn id(&self, symbol: &str) -> Option<u32> {
        self.ids.get(symbol).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_maps_symbols_and_finds_the_padding() {
        let table = TokenTable::parse("_\t0\n \t1\nə\t2\n").unwrap();
        assert_eq!(
            (table.len(), table.pad_id, table.id(" "), table.id("ə"), table.id("x")),
            (3, 0, Some(1), Some(2), None)
        );
    }

    #[test]
    fn broken_tables_are_refused_with_the_line() {
        for (text, message) in [
            ("_\t0\na\t1\na\t2\n", "line 3: symbol `a` appears twice"),
            ("_\t0\na 1\n", "line 2"),
            ("_\t0\na\t7\n", "id 7, beyond"),
            ("a\t0\n", "no padding symbol"),
        ] {
            let error = TokenTable::parse(text).unwrap_err();
            assert!(format!("{error:#}").contains(message), "{text:?}: {error:#}");
        }
    }
}
