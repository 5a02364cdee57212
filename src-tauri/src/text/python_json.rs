//! JSON written the way Python's `json.dumps` writes it, for the `tojson`
//! filter of chat templates: transformers renders templates with its own
//! `tojson` (`json.dumps` with `ensure_ascii=False`), so tool schemas and
//! messages a template prints must be spelled the same byte for byte —
//! `", "` and `": "` between items, `indent` with `","` line ends, keys in
//! the order given, non-ASCII kept unless `ensure_ascii` asks otherwise.

use serde::Serialize;
use serde_json::ser::{CharEscape, Formatter};
use std::io::{self, Write};

/// How `json.dumps` was asked to write.
#[derive(Debug, Clone, Default)]
pub struct PythonJsonStyle {
    /// Spaces per level; `None` writes everything on one line.
    pub indent: Option<usize>,
    pub ensure_ascii: bool,
    /// `(item, key)` separators; Python's defaults when `None`.
    pub separators: Option<(String, String)>,
}

/// `value` as `json.dumps(value, ensure_ascii=False)` writes it: on one
/// line, `", "` and `": "` between items, as templates render calls.
pub fn python_json(value: &serde_json::Value) -> String {
    let style = PythonJsonStyle { ensure_ascii: false, ..Default::default() };
    to_python_json(value, &style).unwrap_or_else(|_| value.to_string())
}

/// `value` as `json.dumps(value, ...)` with `style` writes it.
pub fn to_python_json<T: Serialize + ?Sized>(value: &T, style: &PythonJsonStyle) -> serde_json::Result<String> {
    let (item, key) = style.separators.clone().unwrap_or_else(|| match style.indent {
        Some(_) => (",".into(), ": ".into()),
        None => (", ".into(), ": ".into()),
    });
    let formatter =
        PythonFormatter { indent: style.indent, ensure_ascii: style.ensure_ascii, item, key, open: Vec::new() };
    let mut out = Vec::new();
    value.serialize(&mut serde_json::Serializer::with_formatter(&mut out, formatter))?;
    Ok(String::from_utf8(out).expect("serde_json writes UTF-8"))
}

struct PythonFormatter {
    indent: Option<usize>,
    ensure_ascii: bool,
    item: String,
    key: String,
    /// One entry per open array or object: whether it has had an item yet.
    open: Vec<bool>,
}

impl PythonFormatter {
    /// Before an item: the separator after the previous one, then the line break.
    fn item_start<W: ?Sized + Write>(&self, writer: &mut W, first: bool) -> io::Result<()> {
        if !first {
            writer.write_all(self.item.as_bytes())?;
        }
        self.line_break(writer, self.open.len())
    }

    fn line_break<W: ?Sized + Write>(&self, writer: &mut W, level: usize) -> io::Result<()> {
        if let Some(width) = self.indent {
            writer.write_all(b"\n")?;
            writer.write_all(" ".repeat(width * level).as_bytes())?;
        }
        Ok(())
    }

    fn open<W: ?Sized + Write>(&mut self, writer: &mut W, bracket: &[u8]) -> io::Result<()> {
        self.open.push(false);
        writer.write_all(bracket)
    }

    /// A container's end: on its own line when it held anything (`[]`, `{}` stay whole).
    fn close<W: ?Sized + Write>(&mut self, writer: &mut W, bracket: &[u8]) -> io::Result<()> {
        if self.open.pop().unwrap_or(false) {
            self.line_break(writer, self.open.len())?;
        }
        writer.write_all(bracket)
    }

    fn mark_item(&mut self) {
        if let Some(had_items) = self.open.last_mut() {
            *had_items = true;
        }
    }
}

impl Formatter for PythonFormatter {
    fn begin_array<W: ?Sized + Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.open(writer, b"[")
    }

    fn end_array<W: ?Sized + Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.close(writer, b"]")
    }

    fn begin_array_value<W: ?Sized + Write>(&mut self, writer: &mut W, first: bool) -> io::Result<()> {
        self.mark_item();
        self.item_start(writer, first)
    }

    fn begin_object<W: ?Sized + Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.open(writer, b"{")
    }

    fn end_object<W: ?Sized + Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.close(writer, b"}")
    }

    fn begin_object_key<W: ?Sized + Write>(&mut self, writer: &mut W, first: bool) -> io::Result<()> {
        self.mark_item();
        self.item_start(writer, first)
    }

    fn begin_object_value<W: ?Sized + Write>(&mut self, writer: &mut W) -> io::Result<()> {
        writer.write_all(self.key.as_bytes())
    }

    fn write_string_fragment<W: ?Sized + Write>(&mut self, writer: &mut W, fragment: &str) -> io::Result<()> {
        if !self.ensure_ascii {
            return writer.write_all(fragment.as_bytes());
        }
        for c in fragment.chars() {
            if c.is_ascii() {
                writer.write_all(&[c as u8])?;
            } else {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    write!(writer, "\\u{unit:04x}")?;
                }
            }
        }
        Ok(())
    }

    fn write_char_escape<W: ?Sized + Write>(&mut self, writer: &mut W, escape: CharEscape) -> io::Result<()> {
        let text: String = match escape {
            CharEscape::Quote => "\\\"".into(),
            CharEscape::ReverseSolidus => "\\\\".into(),
            CharEscape::Solidus => "/".into(),
            CharEscape::Backspace => "\\b".into(),
            CharEscape::FormFeed => "\\f".into(),
            CharEscape::LineFeed => "\\n".into(),
            CharEscape::CarriageReturn => "\\r".into(),
            CharEscape::Tab => "\\t".into(),
            CharEscape::AsciiControl(byte) => format!("\\u{byte:04x}"),
        };
        writer.write_all(text.as_bytes())
    }
}
