//! The cluster key: the one secret every machine of a cluster shares.
//!
//! A generated key reads `cake1-<cluster id>-<seven words>`, for example
//! `cake1-q3xk7mfa-bakiro-tunela-...`:
//!
//! - the **cluster id** (8 base32 characters, 40 random bits) is public. It
//!   travels in mDNS records so a master can skip other clusters' workers,
//!   and it is chosen at random when the key is made, so it reveals nothing
//!   about the secret;
//! - the **seven words** of three consonant-vowel syllables (80 syllables,
//!   about 133 random bits) are the secret, short enough to read aloud or
//!   type on a second machine.
//!
//! People may also type their own key. It works, but has no cluster id (so
//! masters try every worker without one), and [`ClusterKey::weakness`]
//! explains why a generated key is better. The handshake in
//! [`super::secure_channel`] is a PAKE, so even a weak key can only be
//! guessed online, one connection per guess.

use anyhow::{bail, Result};
use hmac::{Hmac, Mac};
use rand::Rng;
use sha2::Sha256;

/// What every generated key starts with (also the format's version).
const GENERATED_PREFIX: &str = "cake1-";
const ID_ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
const ID_LEN: usize = 8;
const CONSONANTS: &[u8; 16] = b"bdfghjklmnprstvz";
const VOWELS: &[u8; 5] = b"aeiou";
const WORDS: usize = 7;
const SYLLABLES_PER_WORD: usize = 3;
/// Typed keys shorter than this are refused outright.
const MIN_TYPED_LEN: usize = 8;
/// Typed keys estimated below this many bits get a warning.
const WEAK_BELOW_BITS: f64 = 80.0;
/// What one dictionary word is worth to a guesser (a 8 000-word list).
const DICTIONARY_WORD_BITS: f64 = 13.0;

/// The public id of a cluster, from its generated key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterId(String);

impl ClusterId {
    /// Parses an id as advertised over mDNS; anything malformed is `None`.
    pub fn parse(text: &str) -> Option<Self> {
        let valid = text.len() == ID_LEN && text.bytes().all(|b| ID_ALPHABET.contains(&b));
        valid.then(|| Self(text.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for ClusterId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The shared secret of one cluster, parsed from the text a person typed or
/// pasted. The text itself is not kept.
#[derive(Clone)]
pub struct ClusterKey {
    /// The PAKE password: a hash of the normalised key text.
    password: [u8; 32],
    id: Option<ClusterId>,
    /// Estimated bits of a typed key; `None` for a generated one.
    typed_bits: Option<f64>,
}

impl ClusterKey {
    /// Makes a new random key; returns it as the text to show and share.
    pub fn generate() -> String {
        let mut rng = rand::rng();
        let id: String = (0..ID_LEN).map(|_| ID_ALPHABET[rng.random_range(0..32)] as char).collect();
        let words: Vec<String> = (0..WORDS)
            .map(|_| {
                (0..SYLLABLES_PER_WORD)
                    .flat_map(|_| {
                        let consonant = CONSONANTS[rng.random_range(0..CONSONANTS.len())] as char;
                        let vowel = VOWELS[rng.random_range(0..VOWELS.len())] as char;
                        [consonant, vowel]
                    })
                    .collect()
            })
            .collect();
        format!("{GENERATED_PREFIX}{id}-{}", words.join("-"))
    }

    /// Parses a key. A text starting with `cake1-` must be a whole generated
    /// key (so a mistyped one is caught here, not as a failed handshake);
    /// anything else is a typed key of at least 8 characters.
    pub fn from_passphrase(text: &str) -> Result<Self> {
        let text = text.trim();
        let lowercase = text.to_ascii_lowercase();
        if lowercase.starts_with(GENERATED_PREFIX) {
            return Self::from_generated(&lowercase);
        }
        if text.chars().count() < MIN_TYPED_LEN {
            bail!("the cluster key must be at least {MIN_TYPED_LEN} characters (or use Generate key)");
        }
        Ok(Self { password: derive_password(text), id: None, typed_bits: Some(estimated_bits(text)) })
    }

    fn from_generated(text: &str) -> Result<Self> {
        let rest = &text[GENERATED_PREFIX.len()..];
        let mut parts = rest.split('-');
        let id = parts.next().and_then(ClusterId::parse).ok_or_else(|| {
            anyhow::anyhow!("this generated cluster key is mistyped: after `cake1-` come 8 letters or digits 2-7")
        })?;
        let words: Vec<&str> = parts.collect();
        if words.len() != WORDS {
            bail!(
                "this generated cluster key is mistyped: it should have {WORDS} words after the id, not {}",
                words.len()
            );
        }
        if let Some(bad) = words.iter().find(|w| !is_key_word(w)) {
            bail!("this generated cluster key is mistyped: `{bad}` is not one of its words");
        }
        Ok(Self { password: derive_password(text), id: Some(id), typed_bits: None })
    }

    /// The public cluster id, for a generated key.
    pub fn id(&self) -> Option<&ClusterId> {
        self.id.as_ref()
    }

    /// Why this key is weaker than a generated one, if it is.
    pub fn weakness(&self) -> Option<String> {
        let bits = self.typed_bits?;
        (bits < WEAK_BELOW_BITS).then(|| {
            format!(
                "this typed key is weak (about {bits:.0} bits): anyone on the network may try guesses \
                 against a worker; use Generate key for a key nobody can guess"
            )
        })
    }

    /// The PAKE password both sides feed the handshake.
    pub(super) fn password(&self) -> &[u8; 32] {
        &self.password
    }
}

impl std::fmt::Debug for ClusterKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.id {
            Some(id) => write!(f, "ClusterKey(cluster {id})"),
            None => write!(f, "ClusterKey(typed)"),
        }
    }
}

fn derive_password(normalised: &str) -> [u8; 32] {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(b"cake cluster key v2").expect("HMAC takes any key length");
    mac.update(normalised.as_bytes());
    mac.finalize().into_bytes().into()
}

/// A word of a generated key: three consonant-vowel syllables.
fn is_key_word(word: &str) -> bool {
    let bytes = word.as_bytes();
    bytes.len() == 2 * SYLLABLES_PER_WORD
        && bytes.chunks(2).all(|syllable| CONSONANTS.contains(&syllable[0]) && VOWELS.contains(&syllable[1]))
}

/// A rough estimate of a typed key's strength: each character is worth the
/// bits of the character classes the key uses, except that a run of four or
/// more letters counts as one dictionary word (at most 13 bits), since that
/// is how people pick keys and how guessers guess them.
fn estimated_bits(text: &str) -> f64 {
    let has = |f: fn(&char) -> bool| text.chars().any(|c| f(&c));
    let classes = [
        (has(char::is_ascii_lowercase), 26.0),
        (has(char::is_ascii_uppercase), 26.0),
        (has(char::is_ascii_digit), 10.0),
        (has(|c| !c.is_ascii_alphanumeric()), 33.0),
    ];
    let alphabet: f64 = classes.iter().filter(|(used, _)| *used).map(|(_, size)| size).sum();
    let per_char = alphabet.max(2.0).log2();
    let mut bits = 0.0;
    let mut letters_in_run = 0usize;
    let end_run =
        |run: usize| if run >= 4 { (run as f64 * per_char).min(DICTIONARY_WORD_BITS) } else { run as f64 * per_char };
    for c in text.chars() {
        if c.is_alphabetic() {
            letters_in_run += 1;
        } else {
            bits += end_run(letters_in_run) + per_char;
            letters_in_run = 0;
        }
    }
    bits + end_run(letters_in_run)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_keys_parse_and_carry_their_id() {
        let text = ClusterKey::generate();
        let key = ClusterKey::from_passphrase(&text).unwrap();
        assert_eq!(key.id().unwrap().as_str(), &text[6..14]);
        assert!(key.weakness().is_none());
        // Case and surrounding blanks do not matter when typing it again.
        let again = ClusterKey::from_passphrase(&format!("  {}\n", text.to_uppercase())).unwrap();
        assert_eq!(again.password(), key.password());
        assert_ne!(ClusterKey::from_passphrase(&ClusterKey::generate()).unwrap().password(), key.password());
    }

    #[test]
    fn generated_keys_hold_at_least_128_random_bits() {
        let syllables = (CONSONANTS.len() * VOWELS.len()) as f64;
        let bits = (WORDS * SYLLABLES_PER_WORD) as f64 * syllables.log2();
        assert!(bits >= 128.0, "{bits}");
    }

    #[test]
    fn a_mistyped_generated_key_is_named() {
        let text = ClusterKey::generate();
        let dropped_word = text.rsplit_once('-').unwrap().0;
        let e = ClusterKey::from_passphrase(dropped_word).unwrap_err().to_string();
        assert!(e.contains("6"), "{e}");
        let bad_word = format!("{dropped_word}-bbbbbb");
        let e = ClusterKey::from_passphrase(&bad_word).unwrap_err().to_string();
        assert!(e.contains("`bbbbbb` is not one of its words"), "{e}");
        let e = ClusterKey::from_passphrase("cake1-short-bakiro").unwrap_err().to_string();
        assert!(e.contains("8 letters"), "{e}");
    }

    #[test]
    fn weak_typed_keys_are_warned_about() {
        assert!(ClusterKey::from_passphrase("short").is_err());
        let weak = ClusterKey::from_passphrase("correct horse battery staple").unwrap();
        assert!(weak.id().is_none());
        assert!(weak.weakness().unwrap().contains("Generate key"));
        let strong = ClusterKey::from_passphrase("Tq8#vR2m!Lp9@Xz4$Wk7").unwrap();
        assert!(strong.weakness().is_none(), "{:?}", estimated_bits("Tq8#vR2m!Lp9@Xz4$Wk7"));
        assert!(ClusterKey::from_passphrase("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa").unwrap().weakness().is_some());
        assert!(ClusterKey::from_passphrase("password1234").unwrap().weakness().is_some());
    }

    #[test]
    fn ids_from_the_network_are_checked() {
        assert!(ClusterId::parse("abcd2345").is_some());
        assert!(ClusterId::parse("abcd1345").is_none());
        assert!(ClusterId::parse("abcd23456").is_none());
        assert!(ClusterId::parse("").is_none());
    }
}
