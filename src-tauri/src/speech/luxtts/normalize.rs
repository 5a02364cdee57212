//! English text as ZipVoice's tokenizer prepares it for the phonemizer
//! (docs/luxtts-research.md §2): typographic punctuation mapped to ASCII,
//! a few abbreviations and every number spelled out the way the reference
//! does (inflect's words, years read in pairs), spaces left as they fall.
//! The model was trained on the phonemes of exactly this text.

use regex::{Captures, Regex};
use std::sync::LazyLock;

/// Replacements made before anything else, in order.
const PUNCTUATION: [(&str, &str); 15] = [
    ("，", ","),
    ("。", "."),
    ("！", "!"),
    ("？", "?"),
    ("；", ";"),
    ("：", ":"),
    ("、", ","),
    ("‘", "'"),
    ("“", "\""),
    ("”", "\""),
    ("’", "'"),
    ("⋯", "…"),
    ("···", "…"),
    ("・・・", "…"),
    ("...", "…"),
];

/// Whole words replaced, whatever their case (`mrs` before `mr`).
const ABBREVIATIONS: [(&str, &str); 20] = [
    ("mrs", "misess"),
    ("mr", "mister"),
    ("dr", "doctor"),
    ("st", "saint"),
    ("co", "company"),
    ("jr", "junior"),
    ("maj", "major"),
    ("gen", "general"),
    ("drs", "doctors"),
    ("rev", "reverend"),
    ("lt", "lieutenant"),
    ("hon", "honorable"),
    ("sgt", "sergeant"),
    ("capt", "captain"),
    ("esq", "esquire"),
    ("ltd", "limited"),
    ("col", "colonel"),
    ("ft", "fort"),
    ("etc", "et cetera"),
    ("btw", "by the way"),
];

const UNITS: [&str; 10] = ["", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"];
const TEENS: [&str; 10] =
    ["ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"];
const TENS: [&str; 10] = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"];
const SCALES: [&str; 12] = [
    "",
    "thousand",
    "million",
    "billion",
    "trillion",
    "quadrillion",
    "quintillion",
    "sextillion",
    "septillion",
    "octillion",
    "nonillion",
    "decillion",
];
/// Word endings that change to make an ordinal; any other gets "th".
const ORDINAL_ENDINGS: [(&str, &str); 8] = [
    ("ty", "tieth"),
    ("one", "first"),
    ("two", "second"),
    ("three", "third"),
    ("five", "fifth"),
    ("eight", "eighth"),
    ("nine", "ninth"),
    ("twelve", "twelfth"),
];

fn regex(pattern: &str) -> Regex {
    Regex::new(pattern).expect("a valid pattern")
}

static ABBREVIATION_PATTERNS: LazyLock<Vec<(Regex, &str)>> =
    LazyLock::new(|| ABBREVIATIONS.iter().map(|(short, long)| (regex(&format!(r"(?i)\b{short}\b")), *long)).collect());
static COMMA_NUMBER: LazyLock<Regex> = LazyLock::new(|| regex(r"([0-9][0-9,]+[0-9])"));
static POUNDS: LazyLock<Regex> = LazyLock::new(|| regex(r"£([0-9,]*[0-9]+)"));
static DOLLARS: LazyLock<Regex> = LazyLock::new(|| regex(r"\$([0-9.,]*[0-9]+)"));
static FRACTION: LazyLock<Regex> = LazyLock::new(|| regex(r"([0-9]+)/([0-9]+)"));
static DECIMAL: LazyLock<Regex> = LazyLock::new(|| regex(r"([0-9]+\.[0-9]+)"));
static PERCENT: LazyLock<Regex> = LazyLock::new(|| regex(r"([0-9.,]*[0-9]+%)"));
static ORDINAL: LazyLock<Regex> = LazyLock::new(|| regex(r"[0-9]+(st|nd|rd|th)"));
static NUMBER: LazyLock<Regex> = LazyLock::new(|| regex(r"[0-9]+"));

/// Typographic and full-width punctuation as ASCII; runs of dots as `…`.
pub fn map_punctuation(text: &str) -> String {
    PUNCTUATION.iter().fold(text.to_string(), |text, (from, to)| text.replace(from, to))
}

/// Abbreviations and numbers of an English run of text spelled out.
pub fn normalize_english(text: &str) -> String {
    let mut text = text.to_string();
    for (pattern, long) in ABBREVIATION_PATTERNS.iter() {
        text = pattern.replace_all(&text, *long).into_owned();
    }
    let text = COMMA_NUMBER.replace_all(&text, |c: &Captures| c[1].replace(',', ""));
    let text = POUNDS.replace_all(&text, "$1 pounds");
    let text = DOLLARS.replace_all(&text, |c: &Captures| dollars(&c[1]));
    let text = FRACTION.replace_all(&text, |c: &Captures| fraction(&c[1], &c[2]));
    let text = DECIMAL.replace_all(&text, |c: &Captures| c[1].replace('.', " point "));
    let text = PERCENT.replace_all(&text, |c: &Captures| c[1].replace('%', " percent "));
    let text = ORDINAL.replace_all(&text, |c: &Captures| format!(" {} ", ordinal(&c[0][..c[0].len() - 2])));
    let text = NUMBER.replace_all(&text, |c: &Captures| format!(" {} ", spoken_number(&c[0])));
    text.into_owned()
}

/// `$12.50` → "12 dollars, 50 cents" (digits, spelled out later).
fn dollars(amount: &str) -> String {
    let parts: Vec<&str> = amount.split('.').collect();
    if parts.len() > 2 {
        return format!(" {amount} dollars ");
    }
    let value = |part: Option<&&str>| part.map_or(0u128, |p| p.replace(',', "").parse().unwrap_or(0));
    let (whole, cents) = (value(parts.first()), value(parts.get(1)));
    let unit = |n: u128, one: &str, many: &str| if n == 1 { one.to_string() } else { many.to_string() };
    match (whole, cents) {
        (0, 0) => " zero dollars ".to_string(),
        (w, 0) => format!(" {w} {} ", unit(w, "dollar", "dollars")),
        (0, c) => format!(" {c} {} ", unit(c, "cent", "cents")),
        (w, c) => format!(" {w} {}, {c} {} ", unit(w, "dollar", "dollars"), unit(c, "cent", "cents")),
    }
}

fn fraction(numerator: &str, denominator: &str) -> String {
    let top = cardinal(numerator, "and");
    match (trimmed(numerator), trimmed(denominator)) {
        ("1", "2") => " one half ".to_string(),
        ("1", "4") => " one quarter ".to_string(),
        (_, "2") => format!(" {top} halves "),
        (_, "4") => format!(" {top} quarters "),
        _ => format!(" {top} {} ", ordinal_of_words(&cardinal(denominator, "and"))),
    }
}

/// Digits without their leading zeros ("0" for zero).
fn trimmed(digits: &str) -> &str {
    let t = digits.trim_start_matches('0');
    if t.is_empty() {
        "0"
    } else {
        t
    }
}

/// A number as the reference reads it: years 1001–2999 in pairs
/// ("nineteen ninety-nine", "two thousand five", "nineteen hundred"),
/// anything else as a cardinal without "and".
fn spoken_number(digits: &str) -> String {
    let digits = trimmed(digits);
    let Ok(value) = digits.parse::<u32>() else { return cardinal(digits, "") };
    match value {
        2000 => "two thousand".to_string(),
        2001..=2009 => format!("two thousand {}", cardinal(&(value % 100).to_string(), "")),
        1001..=2999 if value % 100 == 0 => format!("{} hundred", cardinal(&(value / 100).to_string(), "")),
        1001..=2999 => format!("{} {}", pair(value / 100, "oh"), pair(value % 100, "oh")),
        _ => cardinal(digits, ""),
    }
}

/// Two digits read as one word group (`zero` for a leading 0).
fn pair(value: u32, zero: &str) -> String {
    match (value / 10, value % 10) {
        (0, 0) => format!("{zero} {zero}"),
        (0, units) => format!("{zero} {}", UNITS[units as usize]),
        _ => tens(value),
    }
}

/// 1–99 in words ("" for 0).
fn tens(value: u32) -> String {
    let (t, u) = ((value / 10) as usize, (value % 10) as usize);
    match t {
        1 => TEENS[u].to_string(),
        _ if u == 0 => TENS[t].to_string(),
        0 => UNITS[u].to_string(),
        _ => format!("{}-{}", TENS[t], UNITS[u]),
    }
}

/// 1–999 in words ("" for 0), `and_word` after the hundreds if any.
fn hundreds(value: u32, and_word: &str) -> String {
    let (h, rest) = (value / 100, value % 100);
    match (h, rest) {
        (0, _) => tens(rest),
        (_, 0) => format!("{} hundred", UNITS[h as usize]),
        _ if and_word.is_empty() => format!("{} hundred {}", UNITS[h as usize], tens(rest)),
        _ => format!("{} hundred {and_word} {}", UNITS[h as usize], tens(rest)),
    }
}

/// A whole number in words, groups of three digits separated by commas
/// ("four thousand, four hundred forty-four"), the last group joined
/// without a comma when it is one word ("one thousand twenty-one").
/// Numbers beyond the decillions are read digit by digit.
pub fn cardinal(digits: &str, and_word: &str) -> String {
    let digits = trimmed(digits);
    if digits == "0" {
        return "zero".to_string();
    }
    let groups = digits.len().div_ceil(3);
    if groups > SCALES.len() {
        let names: Vec<&str> =
            digits.bytes().map(|d| if d == b'0' { "zero" } else { UNITS[(d - b'0') as usize] }).collect();
        return names.join(" ");
    }
    let mut parts = Vec::new();
    let mut end = digits.len();
    for scale in SCALES.iter().take(groups) {
        let start = end.saturating_sub(3);
        let value: u32 = digits[start..end].parse().unwrap_or(0);
        end = start;
        if value > 0 {
            let words = hundreds(value, and_word);
            parts.push(if scale.is_empty() { words } else { format!("{words} {scale}") });
        }
    }
    parts.reverse();
    let last = parts.pop().unwrap_or_default();
    match parts.is_empty() {
        true => last,
        false if !last.contains(' ') && and_word.is_empty() => format!("{} {last}", parts.join(", ")),
        false if !last.contains(' ') => format!("{} {and_word} {last}", parts.join(", ")),
        false => format!("{}, {last}", parts.join(", ")),
    }
}

/// "21" → "twenty-first", "100" → "one hundredth" (with "and", as the
/// reference's ordinals are).
fn ordinal(digits: &str) -> String {
    ordinal_of_words(&cardinal(digits, "and"))
}

fn ordinal_of_words(words: &str) -> String {
    for (ending, replacement) in ORDINAL_ENDINGS {
        if let Some(stem) = words.strip_suffix(ending) {
            return format!("{stem}{replacement}");
        }
    }
    format!("{words}th")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_as_the_reference_reads_them() {
        let cases = [
            ("0", "zero"),
            ("7", "seven"),
            ("45", "forty-five"),
            ("333", "three hundred thirty-three"),
            ("1001", "one thousand one"),
            ("4444", "four thousand, four hundred forty-four"),
            ("1000000", "one million"),
            ("1000021", "one million twenty-one"),
            ("1100", "one thousand, one hundred"),
        ];
        for (digits, words) in cases {
            assert_eq!(cardinal(digits, ""), words, "{digits}");
        }
        let years = [("1999", "nineteen ninety-nine"), ("1905", "nineteen oh five"), ("2005", "two thousand five")];
        for (digits, words) in years.into_iter().chain([("1900", "nineteen hundred"), ("3000", "three thousand")]) {
            assert_eq!(spoken_number(digits), words, "{digits}");
        }
        for (digits, words) in
            [("21", "twenty-first"), ("5", "fifth"), ("20", "twentieth"), ("101", "one hundred and first")]
        {
            assert_eq!(ordinal(digits), words, "{digits}");
        }
    }

    #[test]
    fn money_fractions_and_abbreviations() {
        assert_eq!(normalize_english("$1.01"), "  one  dollar,  one  cent ");
        assert_eq!(normalize_english("1/2 or 5/8"), " one half  or  five eighth ");
        assert_eq!(normalize_english("Mrs. Co"), "misess. company");
        assert_eq!(map_punctuation("Wait... “no”。"), "Wait… \"no\".");
    }
}
