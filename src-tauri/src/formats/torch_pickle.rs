//! Tensors in a file `torch.save` wrote (a zip archive holding `data.pkl`
//! and one raw file per storage), read without running anything: the pickle
//! is decoded into plain values, and the only calls it describes that are
//! given meaning are torch's tensor rebuild and `OrderedDict()`; every
//! other call is kept as a description of an object (its class, arguments
//! and state). A storage's bytes are checked to hold what a tensor reads
//! before they are copied.

use super::safetensors::StoredDType;
use super::stored_zip::StoredZip;
use anyhow::{bail, Context, Result};
use candle_core::{Device, Tensor};
use std::collections::HashMap;
use std::path::Path;

/// Most values the pickle's stack and memo may hold.
const MAX_VALUES: usize = 1 << 20;
/// Most values the memo may copy out and in, all told: a pickle that
/// fetches a value and builds a pair of it again and again doubles its size
/// each time, and is refused long before memory runs out.
const MAX_COPIED: usize = 1 << 22;

/// A decoded pickle value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Tuple(Vec<Value>),
    List(Vec<Value>),
    Dict(Vec<(Value, Value)>),
    /// A class or function named by module and name (never imported).
    Global(String, String),
    /// `class(*args)`, with the state the pickle then gave it (or, for a
    /// dict subclass, the items it set).
    Object {
        class: (String, String),
        args: Vec<Value>,
        state: Option<Box<Value>>,
    },
    /// A reference to data outside the pickle (a storage, for torch).
    PersistentId(Vec<Value>),
    Tensor(TensorRef),
}

/// A tensor as a view of a storage.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorRef {
    /// The storage's key: its file is `data/{key}`.
    pub storage: String,
    pub dtype: StoredDType,
    /// In elements.
    pub offset: usize,
    pub shape: Vec<usize>,
    /// In elements.
    pub stride: Vec<usize>,
}

impl Value {
    /// How many values this one holds, itself included.
    fn count(&self) -> usize {
        let inner = |items: &[Value]| items.iter().map(Value::count).fold(0usize, usize::saturating_add);
        1usize.saturating_add(match self {
            Self::Tuple(items) | Self::List(items) | Self::PersistentId(items) => inner(items),
            Self::Dict(items) => {
                items.iter().map(|(k, v)| k.count().saturating_add(v.count())).fold(0, usize::saturating_add)
            }
            Self::Object { args, state, .. } => inner(args).saturating_add(state.as_ref().map_or(0, |s| s.count())),
            _ => 0,
        })
    }

    /// The value under `key` of a dict with string keys.
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Self::Dict(items) => items.iter().find(|(k, _)| matches!(k, Self::Str(s) if s == key)).map(|(_, v)| v),
            _ => None,
        }
    }
}

/// A `torch.save` file, its pickle decoded.
pub struct TorchFile {
    zip: StoredZip,
    /// The archive's top folder, with its slash.
    prefix: String,
    pub root: Value,
}

impl TorchFile {
    pub fn open(path: &Path) -> Result<Self> {
        let zip = StoredZip::open(path)?;
        let pickles: Vec<&str> = zip.names().filter(|n| n.ends_with("data.pkl")).collect();
        let [pickle] = pickles.as_slice() else {
            bail!("{}: not a torch.save file (it holds {} data.pkl entries)", path.display(), pickles.len());
        };
        let prefix = pickle.trim_end_matches("data.pkl").to_string();
        if let Ok(order) = zip.entry(&format!("{prefix}byteorder")) {
            if order != b"little" {
                bail!("{}: saved on a big-endian machine, which is not supported", path.display());
            }
        }
        let root = unpickle(zip.entry(pickle)?).with_context(|| format!("{}: an unreadable pickle", path.display()))?;
        Ok(Self { zip, prefix, root })
    }

    /// Copies `tensor`'s elements out of its storage, in order.
    pub fn load(&self, tensor: &TensorRef, device: &Device) -> Result<Tensor> {
        let Some(dtype) = tensor.dtype.candle_dtype() else {
            bail!("a {:?} tensor cannot be loaded", tensor.dtype);
        };
        let bytes = self.zip.entry(&format!("{}data/{}", self.prefix, tensor.storage))?;
        let size = tensor.dtype.size_in_bytes() as usize;
        let elements = bytes.len() / size;
        let count = values_read(tensor, elements)?;
        let mut out = Vec::with_capacity(count * size);
        let mut index = vec![0usize; tensor.shape.len()];
        for _ in 0..count {
            let at = tensor.offset + index.iter().zip(&tensor.stride).map(|(i, s)| i * s).sum::<usize>();
            out.extend_from_slice(&bytes[at * size..(at + 1) * size]);
            // The next index, last dimension fastest.
            for d in (0..index.len()).rev() {
                index[d] += 1;
                if index[d] < tensor.shape[d] {
                    break;
                }
                index[d] = 0;
            }
        }
        Ok(Tensor::from_raw_buffer(&out, dtype, &tensor.shape, device)?)
    }
}

/// How many values `tensor` reads from a storage of `elements` values,
/// after checking that they all lie inside it and are no more than it
/// holds (so a copy is never larger than the file).
fn values_read(tensor: &TensorRef, elements: usize) -> Result<usize> {
    if tensor.shape.len() != tensor.stride.len() {
        bail!("tensor of shape {:?} with strides {:?}", tensor.shape, tensor.stride);
    }
    let count = tensor.shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
    let Some(count) = count.filter(|&n| n <= elements) else {
        bail!("storage {} holds {elements} values; a tensor of shape {:?} needs more", tensor.storage, tensor.shape);
    };
    // The farthest element it reads must lie inside the storage.
    let last = tensor.shape.iter().zip(&tensor.stride).try_fold(tensor.offset, |at, (&n, &s)| {
        if n == 0 {
            Some(at)
        } else {
            at.checked_add((n - 1).checked_mul(s)?)
        }
    });
    if count > 0 && last.is_none_or(|last| last >= elements) {
        bail!(
            "storage {} holds {elements} values; a tensor of shape {:?} reads beyond it",
            tensor.storage,
            tensor.shape
        );
    }
    Ok(count)
}

/// The storage class's element type.
fn storage_dtype(name: &str) -> Option<StoredDType> {
    Some(match name {
        "FloatStorage" => StoredDType::F32,
        "HalfStorage" => StoredDType::F16,
        "BFloat16Storage" => StoredDType::BF16,
        "DoubleStorage" => StoredDType::F64,
        "LongStorage" => StoredDType::I64,
        "IntStorage" => StoredDType::I32,
        "ByteStorage" => StoredDType::U8,
        _ => return None,
    })
}

fn usize_of(value: &Value) -> Result<usize> {
    match value {
        Value::Int(i) if *i >= 0 => Ok(*i as usize),
        other => bail!("{other:?} is not a size"),
    }
}

fn sizes(value: &Value) -> Result<Vec<usize>> {
    match value {
        Value::Tuple(items) | Value::List(items) => items.iter().map(usize_of).collect(),
        other => bail!("{other:?} is not a tuple of sizes"),
    }
}

/// `torch._utils._rebuild_tensor_v2(storage, offset, size, stride, …)`.
fn rebuild_tensor(args: &[Value]) -> Result<Value> {
    let [Value::PersistentId(id), offset, shape, stride, ..] = args else {
        bail!("a tensor rebuilt from {args:?}");
    };
    let [Value::Str(kind), Value::Global(_, class), Value::Str(key), ..] = id.as_slice() else {
        bail!("a storage reference {id:?}");
    };
    if kind != "storage" {
        bail!("a persistent reference of kind {kind}");
    }
    let dtype = storage_dtype(class).with_context(|| format!("storage type {class} is not supported"))?;
    Ok(Value::Tensor(TensorRef {
        storage: key.clone(),
        dtype,
        offset: usize_of(offset)?,
        shape: sizes(shape)?,
        stride: sizes(stride)?,
    }))
}

/// What `callable(*args)` stands for.
fn call(callable: Value, args: Value) -> Result<Value> {
    let args = match args {
        Value::Tuple(items) => items,
        other => bail!("call arguments {other:?} are not a tuple"),
    };
    match callable {
        Value::Global(module, name) if module == "torch._utils" && name == "_rebuild_tensor_v2" => {
            rebuild_tensor(&args)
        }
        Value::Global(module, name) if module == "collections" && name == "OrderedDict" && args.is_empty() => {
            Ok(Value::Dict(Vec::new()))
        }
        Value::Global(module, name) => Ok(Value::Object { class: (module, name), args, state: None }),
        other => bail!("a call of {other:?}"),
    }
}

/// Reads pickle `data` (protocols 2 to 5, the opcodes `torch.save` uses).
pub fn unpickle(data: &[u8]) -> Result<Value> {
    let mut reader = Reader { data, at: 0 };
    let mut stack: Vec<Value> = Vec::new();
    let mut marks: Vec<usize> = Vec::new();
    let mut memo: HashMap<usize, Value> = HashMap::new();
    let mut copied = 0usize;
    let mut copy = |value: &Value| -> Result<Value> {
        copied = copied.saturating_add(value.count());
        if copied > MAX_COPIED {
            bail!("the pickle copies more than {MAX_COPIED} values through its memo");
        }
        Ok(value.clone())
    };
    let pop = |stack: &mut Vec<Value>| stack.pop().context("the pickle's stack ran empty");
    let since_mark = |stack: &mut Vec<Value>, marks: &mut Vec<usize>| -> Result<Vec<Value>> {
        let mark = marks.pop().context("no mark")?;
        if mark > stack.len() {
            bail!("a mark beyond the stack");
        }
        Ok(stack.split_off(mark))
    };
    loop {
        if stack.len() > MAX_VALUES || memo.len() > MAX_VALUES {
            bail!("more than {MAX_VALUES} values");
        }
        let op = reader.byte()?;
        match op {
            0x80 => {
                reader.byte()?; // PROTO
            }
            0x95 => {
                reader.take(8)?; // FRAME
            }
            b'.' => return pop(&mut stack),
            b'(' => marks.push(stack.len()),
            b'N' => stack.push(Value::None),
            0x88 => stack.push(Value::Bool(true)),
            0x89 => stack.push(Value::Bool(false)),
            b'K' => stack.push(Value::Int(reader.byte()? as i64)),
            b'M' => stack.push(Value::Int(u16::from_le_bytes(reader.array()?) as i64)),
            b'J' => stack.push(Value::Int(i32::from_le_bytes(reader.array()?) as i64)),
            0x8a => {
                let n = reader.byte()? as usize;
                let bytes = reader.take(n)?;
                if n > 8 {
                    bail!("an integer of {n} bytes");
                }
                let mut wide = [if bytes.last().is_some_and(|b| b & 0x80 != 0) { 0xFF } else { 0 }; 8];
                wide[..n].copy_from_slice(bytes);
                stack.push(Value::Int(i64::from_le_bytes(wide)));
            }
            b'G' => stack.push(Value::Float(f64::from_be_bytes(reader.array()?))),
            b'X' => {
                let n = u32::from_le_bytes(reader.array()?) as usize;
                stack.push(Value::Str(reader.text(n)?));
            }
            0x8c => {
                let n = reader.byte()? as usize;
                stack.push(Value::Str(reader.text(n)?));
            }
            b')' => stack.push(Value::Tuple(Vec::new())),
            b']' => stack.push(Value::List(Vec::new())),
            b'}' => stack.push(Value::Dict(Vec::new())),
            b't' => {
                let items = since_mark(&mut stack, &mut marks)?;
                stack.push(Value::Tuple(items));
            }
            0x85..=0x87 => {
                let n = (op - 0x84) as usize;
                if stack.len() < n {
                    bail!("a tuple of {n} from a shorter stack");
                }
                let items = stack.split_off(stack.len() - n);
                stack.push(Value::Tuple(items));
            }
            b'l' => {
                let items = since_mark(&mut stack, &mut marks)?;
                stack.push(Value::List(items));
            }
            b'd' => {
                let items = since_mark(&mut stack, &mut marks)?;
                stack.push(Value::Dict(pairs(items)?));
            }
            b'a' | b'e' => {
                let items = if op == b'a' { vec![pop(&mut stack)?] } else { since_mark(&mut stack, &mut marks)? };
                match stack.last_mut() {
                    Some(Value::List(list)) => list.extend(items),
                    other => bail!("appending to {other:?}"),
                }
            }
            b's' | b'u' => {
                let items = if op == b's' {
                    let value = pop(&mut stack)?;
                    vec![pop(&mut stack)?, value]
                } else {
                    since_mark(&mut stack, &mut marks)?
                };
                match stack.last_mut() {
                    Some(Value::Dict(dict)) => dict.extend(pairs(items)?),
                    // A dict subclass's items (a model output): kept as its state.
                    Some(Value::Object { state, .. }) => match state.as_deref_mut() {
                        Some(Value::Dict(dict)) => dict.extend(pairs(items)?),
                        Some(other) => bail!("setting items of an object whose state is {other:?}"),
                        None => *state = Some(Box::new(Value::Dict(pairs(items)?))),
                    },
                    other => bail!("setting items of {other:?}"),
                }
            }
            b'c' => {
                let module = reader.line()?;
                let name = reader.line()?;
                stack.push(Value::Global(module, name));
            }
            0x93 => {
                let name = pop(&mut stack)?;
                let module = pop(&mut stack)?;
                let (Value::Str(module), Value::Str(name)) = (module, name) else {
                    bail!("a global named by something other than strings");
                };
                stack.push(Value::Global(module, name));
            }
            b'R' | 0x81 => {
                let args = pop(&mut stack)?;
                let callable = pop(&mut stack)?;
                stack.push(call(callable, args)?);
            }
            b'b' => {
                let state = pop(&mut stack)?;
                match stack.last_mut() {
                    Some(Value::Object { state: slot, .. }) => *slot = Some(Box::new(state)),
                    // An OrderedDict's state is its (empty) instance dict.
                    Some(Value::Dict(_)) => {}
                    other => bail!("giving state to {other:?}"),
                }
            }
            b'Q' => match pop(&mut stack)? {
                Value::Tuple(items) => stack.push(Value::PersistentId(items)),
                other => bail!("a persistent id {other:?}"),
            },
            b'q' | b'r' | 0x94 => {
                let index = match op {
                    b'q' => reader.byte()? as usize,
                    b'r' => u32::from_le_bytes(reader.array()?) as usize,
                    _ => memo.len(),
                };
                let value = copy(stack.last().context("memoizing from an empty stack")?)?;
                memo.insert(index, value);
            }
            b'h' | b'j' => {
                let index =
                    if op == b'h' { reader.byte()? as usize } else { u32::from_le_bytes(reader.array()?) as usize };
                let value = memo.get(&index).with_context(|| format!("memo slot {index} is empty"))?;
                stack.push(copy(value)?);
            }
            other => bail!("pickle opcode 0x{other:02x} at byte {} is not supported", reader.at - 1),
        }
    }
}

/// `[k0, v0, k1, v1, …]` as pairs.
fn pairs(items: Vec<Value>) -> Result<Vec<(Value, Value)>> {
    if !items.len().is_multiple_of(2) {
        bail!("an odd number of dict items");
    }
    let mut out = Vec::with_capacity(items.len() / 2);
    let mut items = items.into_iter();
    while let (Some(k), Some(v)) = (items.next(), items.next()) {
        out.push((k, v));
    }
    Ok(out)
}

struct Reader<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.data.len()).context("the pickle ends early")?;
        let bytes = &self.data[self.at..end];
        self.at = end;
        Ok(bytes)
    }

    fn byte(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        Ok(self.take(N)?.try_into().expect("N bytes"))
    }

    fn text(&mut self, n: usize) -> Result<String> {
        String::from_utf8(self.take(n)?.to_vec()).context("a string is not UTF-8")
    }

    /// A newline-terminated line (GLOBAL's module and name).
    fn line(&mut self) -> Result<String> {
        let rest = &self.data[self.at..];
        let n = rest.iter().position(|&b| b == b'\n').context("an unterminated line")?;
        let line = self.text(n)?;
        self.at += 1;
        Ok(line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_values_and_calls_are_decoded_without_running_anything() {
        // pickle.dumps({"a": [1, 300, -2], "b": (None, True), "c": <os.system("ls")>}, protocol=2).
        let data = b"\x80\x02}q\x00(X\x01\x00\x00\x00aq\x01]q\x02(K\x01M,\x01J\xfe\xff\xff\xffeX\x01\x00\x00\x00bq\x03N\x88\x86q\x04X\x01\x00\x00\x00cq\x05cos\nsystem\nq\x06X\x02\x00\x00\x00lsq\x07\x85q\x08Rq\tu.";
        let value = unpickle(data).unwrap();
        assert_eq!(value.get("a"), Some(&Value::List(vec![Value::Int(1), Value::Int(300), Value::Int(-2)])));
        assert_eq!(value.get("b"), Some(&Value::Tuple(vec![Value::None, Value::Bool(true)])));
        let Some(Value::Object { class, args, .. }) = value.get("c") else { panic!("{value:?}") };
        assert_eq!(class, &("os".to_string(), "system".to_string()));
        assert_eq!(args, &vec![Value::Str("ls".into())]);
    }

    #[test]
    fn a_tensor_reads_only_inside_its_storage_and_no_more_than_it_holds() {
        let view = |offset, shape: &[usize], stride: &[usize]| TensorRef {
            storage: "0".into(),
            dtype: StoredDType::BF16,
            offset,
            shape: shape.to_vec(),
            stride: stride.to_vec(),
        };
        // A transposed [1, 2, 3, 4] view of 24 values, and one shifted by 1.
        assert_eq!(values_read(&view(0, &[1, 2, 3, 4], &[24, 4, 8, 1]), 24).unwrap(), 24);
        assert!(values_read(&view(1, &[1, 2, 3, 4], &[24, 4, 8, 1]), 24).is_err());
        assert!(values_read(&view(0, &[1 << 40, 1 << 40], &[1, 1]), 24).is_err());
        assert!(values_read(&view(0, &[usize::MAX, 2], &[2, 1]), 24).is_err());
        assert!(values_read(&view(0, &[2, 3], &[3]), 24).is_err());
        assert_eq!(values_read(&view(5, &[0, 7], &[7, 1]), 4).unwrap(), 0);
    }

    #[test]
    fn truncated_or_unknown_input_is_an_error() {
        assert!(unpickle(b"\x80\x02}q\x00(X\x05\x00\x00\x00ab").is_err());
        assert!(unpickle(b"\x80\x02\xff").is_err());
        assert!(unpickle(b"\x80\x02h\x07.").is_err());
        assert!(unpickle(b"\x80\x02t.").is_err());
        // A pair of a pair of … (fetch, fetch, pair, store), 64 times: 2^64 values.
        let mut doubling = b"\x80\x02Nq\x00".to_vec();
        for _ in 0..64 {
            doubling.extend_from_slice(b"h\x00h\x00\x86q\x00");
        }
        doubling.push(b'.');
        let error = unpickle(&doubling).unwrap_err().to_string();
        assert!(error.contains("copies more than"), "{error}");
    }
}
