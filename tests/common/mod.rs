//! Helpers shared by the integration tests: fixture paths and running the
//! `cake` binary.

#![allow(dead_code)]

pub mod fake_hub;
pub mod place;
pub mod server;
pub mod shape_only;
pub mod worker;

use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, Output};

/// A path under `tests/fixtures/`.
pub fn fixture(relative: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures").join(relative)
}

/// The tiny text-model fixtures (`tests/fixtures/tiny/<family>/` with a
/// chat template, made by tests/fixtures/generate_tiny_models.py): the one
/// list every suite takes its families from, in name order. Models that
/// read pictures (a `preprocessor_config.json`) have their own suite,
/// tests/vision.rs.
pub fn tiny_families() -> Vec<String> {
    let mut families: Vec<String> = std::fs::read_dir(fixture("tiny"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|dir| dir.join("chat_template.jinja").exists() && dir.join("reference.json").exists())
        .filter(|dir| !dir.join("preprocessor_config.json").exists())
        .map(|dir| dir.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    families.sort();
    families
}

/// The families that also have llama.cpp's conversion, `model-f32.gguf`.
pub fn tiny_gguf_families() -> Vec<String> {
    tiny_families().into_iter().filter(|f| fixture(&format!("tiny/{f}/model-f32.gguf")).exists()).collect()
}

/// Waits for `cake worker`'s readiness line (`{"ready": "<address>"}` on
/// stdout) and returns the address; keeps draining stdout afterwards.
pub fn ready_address(stdout: std::process::ChildStdout) -> String {
    use std::io::BufRead;
    let mut lines = std::io::BufReader::new(stdout).lines();
    let address = loop {
        let line = lines.next().expect("the worker reports that it is ready").expect("stdout reads");
        if let Ok(Value::Object(ready)) = serde_json::from_str::<Value>(&line) {
            if let Some(Value::String(address)) = ready.get("ready") {
                break address.clone();
            }
        }
    };
    std::thread::spawn(move || for _ in lines {});
    address
}

/// Runs `cake` with `args`, returning its output whatever the exit status.
pub fn cake(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cake"))
        .args(args)
        .env("RAYON_NUM_THREADS", "2")
        .output()
        .expect("the cake binary runs")
}

/// Runs `cake` with `args`, expects success and parses stdout as JSON.
pub fn cake_json(args: &[&str]) -> Value {
    let out = cake(args);
    assert!(out.status.success(), "cake {args:?} failed:\n{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("cake {args:?} printed no JSON ({e}):\n{}", String::from_utf8_lossy(&out.stdout)))
}

/// Runs `cake` with `args`, expects failure and returns stderr.
pub fn cake_error(args: &[&str]) -> String {
    let out = cake(args);
    assert!(
        !out.status.success(),
        "cake {args:?} should have failed but printed:\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub fn join_ids(ids: &[u64]) -> String {
    ids.iter().map(u64::to_string).collect::<Vec<_>>().join(",")
}

/// What a cluster plan counts for a machine running `layers` of `model`
/// loaded in `dtype` (the master also holding the embedding and head):
/// weights, KV cache at the default context, working memory and margin.
pub fn share(
    model: &std::path::Path,
    dtype: Option<candle_core::DType>,
    layers: std::ops::Range<usize>,
    master: bool,
) -> u64 {
    use cake::models::{loader::Checkpoint, loader::LoadOptions, memory_needs::MemoryNeeds};
    let options = LoadOptions { dtype, ..Default::default() };
    MemoryNeeds::of(&Checkpoint::open(model).unwrap(), &options).unwrap().machine_bytes(layers, master)
}

/// How many layers `model` has.
pub fn layer_count(model: &std::path::Path) -> usize {
    cake::models::loader::Checkpoint::open(model).unwrap().config().num_hidden_layers()
}

/// Largest |a − b| relative to the largest |b|, over both flattened to f32.
pub fn relative_error(a: &candle_core::Tensor, b: &candle_core::Tensor) -> f32 {
    let a = a.flatten_all().unwrap().to_dtype(candle_core::DType::F32).unwrap();
    let b = b.flatten_all().unwrap().to_dtype(candle_core::DType::F32).unwrap();
    assert_eq!(a.dims(), b.dims(), "shapes differ");
    let diff = (&a - &b).unwrap().abs().unwrap().max(0).unwrap().to_scalar::<f32>().unwrap();
    let scale = b.abs().unwrap().max(0).unwrap().to_scalar::<f32>().unwrap();
    diff / scale.max(1e-12)
}

/// A TCP connection to `to` from the loopback address `source`.
pub fn connect_from(source: std::net::Ipv4Addr, to: std::net::SocketAddr) -> std::io::Result<std::net::TcpStream> {
    use std::net::{Ipv4Addr, SocketAddr, TcpStream};
    use std::os::fd::FromRawFd;
    let address = |ip: Ipv4Addr, port: u16| libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr { s_addr: u32::from(ip).to_be() },
        sin_zero: [0; 8],
    };
    let SocketAddr::V4(to) = to else { panic!("IPv4 only") };
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: a fresh socket owned by the TcpStream (closed on drop), and
    // addresses that live across the calls.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let stream = TcpStream::from_raw_fd(fd);
        let from = address(source, 0);
        if libc::bind(fd, &from as *const _ as *const libc::sockaddr, len) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let to = address(*to.ip(), to.port());
        if libc::connect(fd, &to as *const _ as *const libc::sockaddr, len) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(stream)
    }
}

/// The picture the image fixture generators compute: value (x·37 + y·11 +
/// c·71 + (x·y mod 13)·19) mod 256 at column x, row y, channel c.
pub fn computed_picture(width: u32, height: u32) -> cake::images::decode::DecodedImage {
    let value = |x: u32, y: u32, c: u32| ((x * 37 + y * 11 + c * 71 + (x * y) % 13 * 19) % 256) as u8;
    let rgb = (0..height).flat_map(|y| (0..width).flat_map(move |x| (0..3).map(move |c| value(x, y, c)))).collect();
    cake::images::decode::DecodedImage { width, height, rgb }
}

/// A PNG claiming `width × height` with a few bytes of compressed pixels:
/// the header of a decompression bomb.
pub fn png_header(width: u32, height: u32) -> Vec<u8> {
    let mut ihdr = b"IHDR".to_vec();
    ihdr.extend(width.to_be_bytes());
    ihdr.extend(height.to_be_bytes());
    ihdr.extend([8, 2, 0, 0, 0]);
    let crc = crc32(&ihdr);
    let mut bytes = b"\x89PNG\r\n\x1a\n".to_vec();
    bytes.extend(13u32.to_be_bytes());
    bytes.extend(ihdr);
    bytes.extend(crc.to_be_bytes());
    // An IDAT with a zlib stream of zeros, then IEND.
    for (kind, data) in [(&b"IDAT"[..], &[0x78, 0x9C, 0x63, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01][..]), (b"IEND", &[])] {
        let mut chunk = kind.to_vec();
        chunk.extend(data);
        bytes.extend((data.len() as u32).to_be_bytes());
        bytes.extend(&chunk);
        bytes.extend(crc32(&chunk).to_be_bytes());
    }
    bytes
}

fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in data {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
        }
    }
    !crc
}
