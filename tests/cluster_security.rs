//! The cluster's secure channel over real loopback TCP: mutual
//! authentication, sealed frames, and every way a peer might cheat or send
//! garbage.

mod common;

use cake::cluster::cluster_key::ClusterKey;
use cake::cluster::protocol::{decode, encode, Hop, Request, Response, WireFormat, WorkerInfo};
use cake::cluster::remote::{RemoteWorker, CONTACT_DEADLINE};
use cake::cluster::secure_channel::{SecureChannel, HANDSHAKE_DEADLINE, MAX_FRAME, PROTOCOL_VERSION};
use cake::cluster::weight_transfer::{read_chunk, ChunkRef, ModelManifest, Piece};
use cake::models::loader::Checkpoint;
use cake::models::sources::selection::TensorSelection;
use common::worker::Worker;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

fn key(text: &str) -> ClusterKey {
    ClusterKey::from_passphrase(text).unwrap()
}

/// A worker that accepts one connection with `worker_key` and returns what
/// `accept` (then one `receive`) gave.
fn worker(worker_key: ClusterKey) -> (u16, thread::JoinHandle<anyhow::Result<Vec<u8>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let handle = thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut channel = SecureChannel::accept(stream, &worker_key, "master")?;
        let message = channel.receive()?;
        channel.send(b"pong")?;
        Ok(message)
    });
    (port, handle)
}

fn connect(port: u16) -> TcpStream {
    let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    stream
}

#[test]
fn same_key_authenticates_and_frames_round_trip() {
    let (port, worker) = worker(key("correct horse battery"));
    let mut master = SecureChannel::connect(connect(port), &key("correct horse battery"), "worker").unwrap();
    master.send(b"ping").unwrap();
    assert_eq!(master.receive().unwrap(), b"pong");
    assert_eq!(worker.join().unwrap().unwrap(), b"ping");
}

#[test]
fn wrong_key_is_rejected_before_any_frame() {
    let (port, worker) = worker(key("correct horse battery"));
    let err = SecureChannel::connect(connect(port), &key("wrong horse battery"), "worker").err().unwrap();
    assert!(format!("{err:#}").contains("does not hold this cluster's key"), "{err:#}");
    let worker_err = worker.join().unwrap().unwrap_err();
    assert!(format!("{worker_err:#}").contains("closed the connection before proving"), "{worker_err:#}");
}

const HEAD_LEN: usize = 6;
const PAKE_LEN: usize = 33;
const CONFIRM_LEN: usize = 32;

fn head() -> Vec<u8> {
    let mut out = b"CAKE".to_vec();
    out.extend_from_slice(&PROTOCOL_VERSION.to_be_bytes());
    out
}

fn read_bytes(stream: &mut TcpStream, n: usize) -> Vec<u8> {
    let mut bytes = vec![0u8; n];
    stream.read_exact(&mut bytes).unwrap();
    bytes
}

/// A worker's SPAKE2 message presented as a master's (side byte 'A').
fn as_master_message(worker_hello: &[u8]) -> Vec<u8> {
    let mut message = worker_hello[HEAD_LEN..HEAD_LEN + PAKE_LEN].to_vec();
    message[0] = b'A';
    message
}

#[test]
fn a_peer_without_the_key_cannot_reflect_the_workers_messages() {
    // The attacker opens connections a and b, feeds each the worker's own
    // PAKE message from the other, and offers each the confirmation the
    // worker produced on the other. Confirmations name their role, so the
    // worker accepts neither.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let worker_key = key("correct horse battery");
    let server = thread::spawn(move || {
        let mut results = Vec::new();
        for _ in 0..2 {
            let (stream, _) = listener.accept().unwrap();
            stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let key = worker_key.clone();
            results.push(thread::spawn(move || SecureChannel::accept(stream, &key, "master").map(|_| ())));
        }
        results.into_iter().map(|h| h.join().unwrap()).collect::<Vec<_>>()
    });
    let mut a = connect(port);
    a.write_all(&head()).unwrap();
    let hello_a = read_bytes(&mut a, HEAD_LEN + PAKE_LEN);
    let mut b = connect(port);
    b.write_all(&head()).unwrap();
    let hello_b = read_bytes(&mut b, HEAD_LEN + PAKE_LEN);
    b.write_all(&as_master_message(&hello_a)).unwrap();
    let confirm_b = read_bytes(&mut b, CONFIRM_LEN);
    a.write_all(&as_master_message(&hello_b)).unwrap();
    let confirm_a = read_bytes(&mut a, CONFIRM_LEN);
    a.write_all(&confirm_b).unwrap();
    b.write_all(&confirm_a).unwrap();
    for result in server.join().unwrap() {
        let err = result.unwrap_err();
        assert!(format!("{err:#}").contains("does not hold this cluster's key"), "{err:#}");
    }
}

#[test]
fn a_replayed_handshake_fails() {
    // Record everything a genuine master sends in one session…
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let k = key("correct horse battery");
    let recorder = {
        let k = k.clone();
        thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            // Answer as a real worker would, to get the master's confirmation.
            let mut tee = Tee { inner: stream, recorded: Vec::new() };
            SecureChannel::accept(&mut tee, &k, "master").unwrap();
            (listener, tee.recorded)
        })
    };
    let _genuine = SecureChannel::connect(connect(port), &k, "worker").unwrap();
    let (listener, recorded) = recorder.join().unwrap();
    assert_eq!(recorded.len(), HEAD_LEN + PAKE_LEN + CONFIRM_LEN);
    // …then replay it to the worker on a new connection.
    let port = listener.local_addr().unwrap().port();
    let replay = thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        SecureChannel::accept(stream, &k, "master").map(|_| ())
    });
    let mut attacker = connect(port);
    attacker.write_all(&recorded).unwrap();
    let err = replay.join().unwrap().unwrap_err();
    assert!(format!("{err:#}").contains("does not hold this cluster's key"), "{err:#}");
}

/// Records what is read from `inner`.
struct Tee<S> {
    inner: S,
    recorded: Vec<u8>,
}

impl<S: Read> Read for Tee<S> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.recorded.extend_from_slice(&buf[..n]);
        Ok(n)
    }
}

impl<S: Write> Write for Tee<S> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.inner.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Both directions of one handshake between a master and a worker with `k`.
fn recorded_handshake(k: &ClusterKey) -> (Vec<u8>, Vec<u8>) {
    let (here, there) = {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        (connect(port), listener.accept().unwrap().0)
    };
    let worker_key = k.clone();
    let worker = thread::spawn(move || {
        let mut tee = Tee { inner: there, recorded: Vec::new() };
        SecureChannel::accept(&mut tee, &worker_key, "master").unwrap();
        tee.recorded
    });
    let mut tee = Tee { inner: here, recorded: Vec::new() };
    SecureChannel::connect(&mut tee, k, "worker").unwrap();
    (worker.join().unwrap(), tee.recorded)
}

#[test]
fn two_handshakes_with_the_same_key_share_nothing_but_the_headers() {
    let k = key(&ClusterKey::generate());
    let (master_1, worker_1) = recorded_handshake(&k);
    let (master_2, worker_2) = recorded_handshake(&k);
    assert_eq!(master_1.len(), HEAD_LEN + PAKE_LEN + CONFIRM_LEN);
    assert_eq!(worker_1.len(), HEAD_LEN + PAKE_LEN + CONFIRM_LEN);
    for (first, second) in [(&master_1, &master_2), (&worker_1, &worker_2)] {
        // "CAKE", the version and SPAKE2's side byte are fixed; nothing else repeats.
        assert_eq!(first[..HEAD_LEN + 1], second[..HEAD_LEN + 1]);
        let rest = |bytes: &[u8]| bytes[HEAD_LEN + 1..].to_vec();
        let same = rest(first).iter().zip(rest(second)).filter(|(a, b)| **a == *b).count();
        // Independent random bytes agree in about 1 of 256 positions.
        assert!(same <= 6, "{same} of {} bytes repeat across handshakes", first.len() - HEAD_LEN - 1);
        for window in rest(first).windows(4) {
            assert!(!rest(second).windows(4).any(|w| w == window), "a 4-byte run repeats across handshakes");
        }
    }
}

#[test]
fn a_debug_print_does_not_reveal_the_key() {
    let text = ClusterKey::generate();
    let k = key(&text);
    let printed = format!("{k:?}");
    assert!(printed.contains(k.id().unwrap().as_str()));
    assert!(!printed.contains(text.rsplit('-').next().unwrap()), "{printed}");
    assert!(!format!("{:?}", key("correct horse battery")).contains("correct"));
}

#[test]
fn a_flipped_bit_in_a_sealed_frame_closes_the_connection() {
    let (port, worker) = worker(key("correct horse battery"));
    // A relay between master and worker that flips one bit of the first frame.
    let relay = TcpListener::bind("127.0.0.1:0").unwrap();
    let relay_port = relay.local_addr().unwrap().port();
    thread::spawn(move || {
        let (mut from_master, _) = relay.accept().unwrap();
        let mut to_worker = connect(port);
        let mut back_worker = to_worker.try_clone().unwrap();
        let mut back_master = from_master.try_clone().unwrap();
        thread::spawn(move || {
            let _ = std::io::copy(&mut back_worker, &mut back_master);
        });
        let handshake = HEAD_LEN + PAKE_LEN + CONFIRM_LEN;
        let mut sent = 0usize;
        let mut buf = [0u8; 1];
        while from_master.read_exact(&mut buf).is_ok() {
            if sent == handshake + 4 + 2 {
                buf[0] ^= 0x01;
            }
            sent += 1;
            if to_worker.write_all(&buf).is_err() {
                break;
            }
        }
    });
    let mut master = SecureChannel::connect(connect(relay_port), &key("correct horse battery"), "worker").unwrap();
    master.send(b"transfer 100 coins").unwrap();
    let err = worker.join().unwrap().unwrap_err();
    assert!(format!("{err:#}").contains("failed authentication"), "{err:#}");
}

#[test]
fn random_bytes_get_a_clear_error() {
    let (port, worker) = worker(key("correct horse battery"));
    let mut stream = connect(port);
    let garbage: Vec<u8> = (0..64).map(|i| (i * 37 % 251) as u8).collect();
    stream.write_all(&garbage).unwrap();
    let err = worker.join().unwrap().unwrap_err();
    assert!(format!("{err:#}").contains("is not a Cake node"), "{err:#}");
}

#[test]
fn a_frame_claiming_4_gib_is_refused_without_allocating_it() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let k = key("correct horse battery");
    let worker = {
        let k = k.clone();
        thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let mut channel = SecureChannel::accept(stream, &k, "master").unwrap();
            channel.receive()
        })
    };
    let stream = connect(port);
    let mut raw = stream.try_clone().unwrap();
    let _master = SecureChannel::connect(stream, &k, "worker").unwrap();
    raw.write_all(&u32::MAX.to_be_bytes()).unwrap();
    let err = worker.join().unwrap().unwrap_err();
    let message = format!("{err:#}");
    assert!(message.contains("4294967295 bytes") && message.contains(&MAX_FRAME.to_string()), "{message}");
}

#[test]
fn a_version_mismatch_names_both_versions() {
    // A worker from the future answers with version 9.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut hello_in = [0u8; HEAD_LEN + PAKE_LEN];
        stream.read_exact(&mut hello_in).unwrap();
        let mut reply = b"CAKE".to_vec();
        reply.extend_from_slice(&9u16.to_be_bytes());
        reply.extend_from_slice(&[1u8; 64]);
        stream.write_all(&reply).unwrap();
    });
    let err = SecureChannel::connect(connect(port), &key("correct horse battery"), "worker-a").err().unwrap();
    let message = format!("{err:#}");
    assert!(
        message.contains(&format!("worker-a speaks cluster protocol v9, this app v{PROTOCOL_VERSION}")),
        "{message}"
    );

    // And a master from the future reaching a worker of today.
    let (port, worker) = worker(key("correct horse battery"));
    let mut stream = connect(port);
    let mut future = b"CAKE".to_vec();
    future.extend_from_slice(&9u16.to_be_bytes());
    future.extend_from_slice(&[2u8; 32]);
    stream.write_all(&future).unwrap();
    let err = worker.join().unwrap().unwrap_err();
    assert!(
        format!("{err:#}").contains(&format!("speaks cluster protocol v9, this app v{PROTOCOL_VERSION}")),
        "{err:#}"
    );
}

/// Threads and open descriptors of process `pid`.
fn threads_and_descriptors(pid: u32) -> (usize, usize) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let threads = status.lines().find_map(|l| l.strip_prefix("Threads:")).unwrap().trim().parse().unwrap();
    let descriptors = std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap().count();
    (threads, descriptors)
}

/// Lets this process hold `n` sockets.
fn allow_descriptors(n: u64) {
    // SAFETY: plain system calls on a local struct.
    unsafe {
        let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit), 0);
        limit.rlim_cur = limit.rlim_cur.max(n.min(limit.rlim_max));
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &limit), 0);
    }
}

/// Whether the other end has closed `stream` (checked without waiting).
fn hung_up(stream: &TcpStream) -> bool {
    stream.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 64];
    let closed = match (&*stream).read(&mut buf) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
    };
    stream.set_nonblocking(false).unwrap();
    closed
}

#[test]
fn a_peer_dripping_its_hello_is_dropped_at_the_handshake_deadline() {
    let worker = Worker::start("correct horse battery", "drip", None);
    let mut stream = TcpStream::connect(&worker.address).unwrap();
    let started = Instant::now();
    let mut dropped_after = None;
    // One byte a second of a plausible hello: each byte would restart a per-read timeout.
    for byte in b"CAKE\0\x02".iter().cycle().take(30) {
        thread::sleep(Duration::from_secs(1));
        if stream.write_all(&[*byte]).is_err() {
            dropped_after = Some(started.elapsed());
            break;
        }
        if hung_up(&stream) {
            dropped_after = Some(started.elapsed());
            break;
        }
    }
    let after = dropped_after.expect("the worker was still serving the dripping peer after 30 s");
    assert!(after <= HANDSHAKE_DEADLINE + Duration::from_secs(3), "dropped after {after:?}");
}

#[test]
fn a_thousand_idle_connections_cost_a_worker_a_fixed_share_and_a_master_still_gets_in() {
    allow_descriptors(1200);
    let worker = Worker::start("correct horse battery", "flood", None);
    let address: SocketAddr = worker.address.parse().unwrap();
    thread::sleep(Duration::from_millis(300));
    let (threads_before, descriptors_before) = threads_and_descriptors(worker.child.id());
    let attacker = Ipv4Addr::new(127, 0, 0, 2);
    let idle: Vec<TcpStream> = (0..1000).filter_map(|_| common::connect_from(attacker, address).ok()).collect();
    assert!(idle.len() >= 900, "only {} connections opened", idle.len());
    thread::sleep(Duration::from_secs(1));
    let (threads, descriptors) = threads_and_descriptors(worker.child.id());
    assert!(threads <= threads_before + 8, "{threads} threads (from {threads_before}) under 1000 idle connections");
    assert!(descriptors <= descriptors_before + 16, "{descriptors} descriptors (from {descriptors_before})");
    let started = Instant::now();
    let master =
        RemoteWorker::connect(&worker.address, &key("correct horse battery")).expect("a genuine master gets in");
    assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
    assert_eq!(master.info.name, "flood");
    drop(idle);
}

/// Four addresses, each holding four idle connections and reopening any
/// that is dropped at once, do not keep a genuine master out: a newcomer
/// takes the slot of the address holding the most.
#[test]
fn addresses_squatting_every_handshake_slot_do_not_keep_a_master_out() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let worker = Worker::start("correct horse battery", "squatted", None);
    let address: SocketAddr = worker.address.parse().unwrap();
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let squatters: Vec<_> = (2..6)
        .map(|last| {
            let stop = stop.clone();
            thread::spawn(move || {
                let source = Ipv4Addr::new(127, 0, 0, last);
                let (mut held, mut opened) = (Vec::<TcpStream>::new(), 0);
                while !stop.load(Ordering::Relaxed) {
                    held.retain(|stream| !hung_up(stream));
                    while held.len() < 4 {
                        let Ok(stream) = common::connect_from(source, address) else { break };
                        held.push(stream);
                        opened += 1;
                    }
                    thread::sleep(Duration::from_millis(2));
                }
                opened
            })
        })
        .collect();
    thread::sleep(Duration::from_millis(1500));
    for attempt in 0..12 {
        let started = Instant::now();
        let master = RemoteWorker::connect(&worker.address, &key("correct horse battery"))
            .unwrap_or_else(|e| panic!("try {attempt}: {e:#}"));
        assert!(started.elapsed() < Duration::from_secs(2), "try {attempt}: {:?}", started.elapsed());
        assert_eq!(master.info.name, "squatted");
    }
    stop.store(true, Ordering::Relaxed);
    let opened: usize = squatters.into_iter().map(|s| s.join().unwrap()).sum();
    assert!(opened > 16, "the squatters reopened what was dropped ({opened} connections)");
}

/// The identity (a point of small order) as the master's SPAKE2 message
/// is refused before the worker answers with anything derived from it.
#[test]
fn a_small_order_point_as_a_handshake_message_is_refused() {
    let (port, worker) = worker(key("correct horse battery"));
    let mut stream = connect(port);
    stream.write_all(&head()).unwrap();
    let _worker_hello = read_bytes(&mut stream, HEAD_LEN + PAKE_LEN);
    let mut identity = vec![b'A', 1];
    identity.resize(PAKE_LEN, 0);
    stream.write_all(&identity).unwrap();
    assert_eq!(stream.read(&mut [0u8; CONFIRM_LEN]).unwrap_or(0), 0, "no confirmation for the identity");
    let err = worker.join().unwrap().unwrap_err();
    assert!(format!("{err:#}").contains("not a usable group element"), "{err:#}");
}

#[test]
fn a_silent_worker_holds_a_master_no_longer_than_the_contact_deadline() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    // Accepts, reads the master's hello, and says nothing.
    let silent = thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut hello = [0u8; 39];
        let _ = stream.read_exact(&mut hello);
        thread::sleep(CONTACT_DEADLINE + Duration::from_secs(3));
    });
    let started = Instant::now();
    let err = RemoteWorker::connect(&address, &key("correct horse battery")).err().expect("a silent worker is refused");
    let took = started.elapsed();
    assert!(
        took >= CONTACT_DEADLINE - Duration::from_millis(500) && took <= CONTACT_DEADLINE + Duration::from_secs(1),
        "{took:?}"
    );
    assert!(format!("{err:#}").contains(&address), "{err:#}");
    silent.join().unwrap();
}

/// A master holding the key that sends `request` (and `payload`) and
/// returns the worker's answer.
fn ask(channel: &mut SecureChannel<TcpStream>, request: &Request, payload: &[u8]) -> Response {
    channel.send(&encode(request, payload)).unwrap();
    let frame = channel.receive().expect("the worker answers instead of dropping the connection");
    decode::<Response>(&frame).unwrap().0
}

/// The answer is a clean error that mentions `expected`.
fn assert_refused(answer: Response, expected: &str) {
    match answer {
        Response::Error { message } => assert!(message.contains(expected), "`{message}` should mention `{expected}`"),
        other => panic!("expected an error mentioning `{expected}`, got {other:?}"),
    }
}

/// Sends `load` (a `Load` of the model at `model`), then every chunk the
/// worker asks for, then `load` again; the worker's last answer.
fn load_fully(channel: &mut SecureChannel<TcpStream>, model: &std::path::Path, load: &Request) -> Response {
    let Request::Load { manifest, .. } = load else { panic!("not a Load: {load:?}") };
    let answer = ask(channel, load, &[]);
    let Response::NeedChunks { chunks } = answer else { return answer };
    for chunk in chunks {
        let (sha256, packed) = read_chunk(model, manifest, chunk).unwrap();
        let request = Request::Chunk { manifest_key: manifest.key.clone(), chunk, sha256 };
        assert_eq!(ask(channel, &request, &packed), Response::Done);
    }
    ask(channel, load, &[])
}

/// A load of layer 1 of the model at `model`, for `context_length` tokens.
fn load_layer_one(model: &std::path::Path, context_length: usize) -> Request {
    let checkpoint = Checkpoint::open(model).unwrap();
    let selection = TensorSelection { layers: 1..2, embedding: false, head: false };
    let manifest =
        ModelManifest::for_selection(model, &selection, checkpoint.config().tie_word_embeddings, checkpoint.layout())
            .unwrap();
    Request::Load { manifest, start: 1, end: 2, dtype: None, context_length }
}

/// A master connection holding the key.
fn master_channel(address: &str) -> SecureChannel<TcpStream> {
    let stream = TcpStream::connect(address).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    SecureChannel::connect(stream, &key("correct horse battery"), "worker").unwrap()
}

/// One forward step of `positions` positions of sequence 1, all 0.5.
fn step(width: usize, positions: usize, format: WireFormat) -> (Request, Vec<u8>) {
    let payload = match format {
        WireFormat::F32 => (0..width * positions).flat_map(|_| 0.5f32.to_le_bytes()).collect(),
        WireFormat::F16 => (0..width * positions).flat_map(|_| half::f16::from_f32(0.5).to_le_bytes()).collect(),
    };
    (Request::Forward { sequence: 1, shape: vec![1, positions, width], format, route: vec![], mutual: vec![] }, payload)
}

#[test]
fn a_rogue_master_gets_clean_errors_and_the_worker_stays_up() {
    let worker = Worker::start("correct horse battery", "sturdy", None);
    let stream = TcpStream::connect(&worker.address).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut channel = SecureChannel::connect(stream, &key("correct horse battery"), "worker").unwrap();

    // Manifests that are lies.
    let model = common::fixture("tiny/llama_tied");
    let checkpoint = Checkpoint::open(&model).unwrap();
    let selection = TensorSelection { layers: 1..2, embedding: false, head: false };
    let manifest =
        ModelManifest::for_selection(&model, &selection, checkpoint.config().tie_word_embeddings, checkpoint.layout())
            .unwrap();
    let own_context = checkpoint.config().max_position_embeddings;
    let load_for = |manifest: ModelManifest, context_length: usize| Request::Load {
        manifest,
        start: 1,
        end: 2,
        dtype: None,
        context_length,
    };
    let load = |manifest: ModelManifest| load_for(manifest, own_context);
    let no_files = ModelManifest { gguf: true, files: vec![], ..manifest.clone() };
    assert_refused(ask(&mut channel, &load(no_files), &[]), "1 to 1024 files");
    let mut huge = manifest.clone();
    huge.files[0].len = 1 << 62;
    huge.files[0].pieces = vec![Piece { offset: 0, len: 1 << 62 }];
    assert_refused(ask(&mut channel, &load(huge), &[]), "over the");

    // A genuine load, then hidden states that are lies.
    let answer = load_fully(&mut channel, &model, &load(manifest.clone()));
    assert!(matches!(answer, Response::Loaded { start: 1, end: 2, inbox } if inbox != 0), "{answer:?}");
    // A context beyond the model's own would make every cache unbounded.
    assert_refused(ask(&mut channel, &load_for(manifest.clone(), 1 << 40), &[]), "longer than the model's own");
    let reloaded = ask(&mut channel, &load(manifest.clone()), &[]);
    assert!(matches!(reloaded, Response::Loaded { start: 1, end: 2, .. }), "{reloaded:?}");
    let width = checkpoint.config().hidden_size;
    let forward = |shape: Vec<usize>| Request::Forward {
        sequence: 1,
        shape,
        format: WireFormat::F32,
        route: vec![],
        mutual: vec![],
    };
    assert_refused(ask(&mut channel, &forward(vec![1, 0, width]), &[]), "positions ≥ 1");
    assert_refused(ask(&mut channel, &forward(vec![1, 400_000, width]), &[]), "context length");
    assert_refused(ask(&mut channel, &forward(vec![1, 1, width + 1]), &[0; 4]), "positions ≥ 1");
    let nan: Vec<u8> = (0..width).flat_map(|i| if i == 3 { f32::NAN } else { 0.5 }.to_le_bytes()).collect();
    assert_refused(ask(&mut channel, &forward(vec![1, 1, width]), &nan), "non-finite");
    // Picture spans must lie inside the step, in order.
    let two: Vec<u8> = (0..2 * width).flat_map(|_| 0.5f32.to_le_bytes()).collect();
    for spans in [&[(0, 3)][..], &[(1, 1)], &[(0, 2), (1, 2)]] {
        let mut step = forward(vec![1, 2, width]);
        if let Request::Forward { mutual, .. } = &mut step {
            *mutual = spans.iter().map(|&(start, end)| start..end).collect();
        }
        assert_refused(ask(&mut channel, &step, &two), "cannot see each other");
    }
    let fine: Vec<u8> = (0..width).flat_map(|_| 0.5f32.to_le_bytes()).collect();
    assert!(matches!(ask(&mut channel, &forward(vec![1, 1, width]), &fine), Response::Hidden { .. }));
    // Relays (not answered): only forward steps, only to an inbox that
    // exists; one that cannot be handed over closes the connection it came on.
    let Response::Loaded { inbox, .. } = answer else { unreachable!() };
    let step = Box::new(forward(vec![1, 1, width]));
    for (relay, payload) in [
        (Request::Relay { inbox: inbox ^ 1, step: step.clone() }, &fine[..]),
        (Request::Relay { inbox, step: Box::new(Request::Heartbeat) }, &[][..]),
    ] {
        let stream = TcpStream::connect(&worker.address).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut link = SecureChannel::connect(stream, &key("correct horse battery"), "worker").unwrap();
        link.send(&encode(&relay, payload)).unwrap();
        let sent = Instant::now();
        assert!(link.receive().is_err(), "nothing answers a relay");
        assert!(sent.elapsed() < Duration::from_secs(10), "a refused relay closes its connection: {relay:?}");
    }
    // A route longer than any cluster is refused before anything runs.
    let hop = Hop { address: "127.0.0.1:9".into(), inbox: 1 };
    let long_route = Request::Forward {
        sequence: 1,
        shape: vec![1, 1, width],
        format: WireFormat::F32,
        route: vec![hop; 33],
        mutual: vec![],
    };
    assert_refused(ask(&mut channel, &long_route, &fine), "longer than the 32 allowed");
    let mut worker = worker;
    assert!(worker.child.try_wait().unwrap().is_none(), "the worker process is still running");
}

/// A worker holding the key that lies: it serves master connections for
/// up to a minute, answering each request with `answer`.
fn rogue_worker(
    answer: impl Fn(&Request, &[u8]) -> (Response, Vec<u8>) + Send + Sync + 'static,
) -> (String, thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    listener.set_nonblocking(true).unwrap();
    let answer = std::sync::Arc::new(answer);
    let handle = thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            let Ok((stream, _)) = listener.accept() else {
                thread::sleep(Duration::from_millis(20));
                continue;
            };
            stream.set_nonblocking(false).unwrap();
            stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
            let answer = answer.clone();
            thread::spawn(move || {
                let Ok(mut channel) = SecureChannel::accept(stream, &key("correct horse battery"), "master") else {
                    return;
                };
                while let Ok(frame) = channel.receive() {
                    let Ok((request, payload)) = decode::<Request>(&frame) else { return };
                    let (response, body) = answer(&request, payload);
                    if channel.send(&encode(&response, &body)).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (address, handle)
}

fn rogue_info(memory_bytes: u64, bytes_per_second: f64) -> Response {
    Response::Info(WorkerInfo {
        name: "rogue".into(),
        os: "linux".into(),
        cpu: "?".into(),
        devices: vec![],
        memory_bytes,
        bytes_per_second,
        prompt_bytes_per_second: bytes_per_second,
        layer_overhead_seconds: 0.0,
        kernel_boot: String::new(),
        instance: String::new(),
        gpu: None,
    })
}

/// `cake run` on the two-layer fixture over `worker`; returns (success, stderr).
fn run_over(worker: &str) -> (bool, String) {
    let model = common::fixture("tiny/llama_tied");
    let out = common::cake(&[
        "run",
        "--model",
        model.to_str().unwrap(),
        "--prompt-tokens",
        "5,6,7",
        "--max-tokens",
        "3",
        "--temperature",
        "0",
        "--ignore-eos",
        "--cluster-key",
        "correct horse battery",
        "--worker",
        worker,
    ]);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!err.contains("panicked"), "the master panicked:\n{err}");
    (out.status.success(), err)
}

#[test]
fn a_rogue_worker_gets_clean_errors_and_never_sees_raw_embeddings() {
    // Endless memory, an absurd speed, and a chunk request of 2^62 bytes.
    let (address, _worker) = rogue_worker(|request, _| match request {
        Request::Info => (rogue_info(u64::MAX, 1e15), vec![]),
        Request::Load { .. } => {
            let chunk = ChunkRef { file: 0, offset: 0, len: 1 << 62 };
            (Response::NeedChunks { chunks: vec![chunk, chunk] }, vec![])
        }
        _ => (Response::Error { message: "no".into() }, vec![]),
    });
    let (ok, err) = run_over(&address);
    assert!(!ok);
    assert!(err.contains("asked for weights it cannot have: a chunk the manifest does not list"), "{err}");
    // The claims lost: the master kept the first layer, the worker got only the second.
    assert!(err.contains("rogue could not load layers 1..2"), "{err}");

    // Hidden states holding NaN, then of the wrong shape: the master stops
    // with an error naming the worker and the problem.
    for lie in ["nan", "shape"] {
        let (address, _worker) = rogue_worker(move |request, payload| match request {
            Request::Info => (rogue_info(1 << 30, 1e12), vec![]),
            Request::Load { start, end, .. } => (Response::Loaded { start: *start, end: *end, inbox: 0 }, vec![]),
            Request::Forward { shape, format, .. } if lie == "nan" => {
                let mut body = payload.to_vec();
                let nan = match format {
                    WireFormat::F32 => f32::NAN.to_le_bytes().to_vec(),
                    WireFormat::F16 => half::f16::NAN.to_le_bytes().to_vec(),
                };
                body[..nan.len()].copy_from_slice(&nan);
                let answer = Response::Hidden {
                    shape: shape.clone(),
                    format: *format,
                    compute_nanos: u64::MAX,
                    kv_bytes: u64::MAX,
                };
                (answer, body)
            }
            Request::Forward { shape, format, .. } => {
                let wrong = vec![shape[0], shape[1], shape[2] / 2];
                (
                    Response::Hidden { shape: wrong, format: *format, compute_nanos: 1, kv_bytes: 0 },
                    payload[..payload.len() / 2].to_vec(),
                )
            }
            _ => (Response::Done, vec![]),
        });
        let (ok, err) = run_over(&address);
        assert!(!ok, "{err}");
        let expected = if lie == "nan" { "rogue (127.0.0.1" } else { "answered hidden states of shape" };
        assert!(err.contains(expected) && err.contains(&address), "{lie}: {err}");
        assert!(lie != "nan" || err.contains("non-finite"), "{err}");
    }
}

/// A worker claiming more speed than it shows, on its CPU or on a GPU, is
/// doubted and planned with what it showed.
#[test]
fn a_worker_claiming_more_speed_than_it_shows_is_doubted_and_planned_with_what_it_showed() {
    // 1 000 GB/s on its CPU; or a modest CPU and a GPU with 1 TB of VRAM at 1 000 GB/s.
    let gpu = cake::cluster::protocol::GpuReport {
        device: "Imaginary GPU (Vulkan, discrete)".into(),
        total_bytes: Some(1 << 40),
        free_bytes: Some(1 << 40),
        capacity: cake::cluster::assignment::GpuCapacity {
            memory_bytes: Some(1 << 40),
            max_layers: None,
            bytes_per_second: 1e12,
            prompt_bytes_per_second: 1e13,
            layer_overhead_seconds: 0.0,
        },
    };
    let mut on_gpu = rogue_info(1 << 30, 1e9);
    if let Response::Info(info) = &mut on_gpu {
        info.gpu = Some(Box::new(gpu));
    }
    for (claim, info) in [("CPU", rogue_info(1 << 40, 1e12)), ("GPU", on_gpu)] {
        doubted_once_measured(claim, info);
    }
}

/// A rogue worker answering `info` to Info requests but taking 30 ms per
/// step (answering with the states it was sent: the reply is nonsense, the
/// timing is the point) wins layers with its claim, is doubted, and gets
/// far fewer when the model loads again.
fn doubted_once_measured(claim: &str, info: Response) {
    let (address, _worker) = rogue_worker(move |request, payload| match request {
        Request::Info => (info.clone(), vec![]),
        Request::Load { start, end, .. } => (Response::Loaded { start: *start, end: *end, inbox: 0 }, vec![]),
        Request::Forward { shape, format, .. } | Request::ForwardStreams { shape, format, .. } => {
            thread::sleep(Duration::from_millis(30));
            (
                Response::Hidden { shape: shape.clone(), format: *format, compute_nanos: 1, kv_bytes: 0 },
                payload.to_vec(),
            )
        }
        _ => (Response::Done, vec![]),
    });
    let root = tempfile::tempdir().unwrap();
    let data = common::server::data_dir_with_default_model(root.path());
    let server = common::server::Server::start_with_env(
        &data,
        &root.path().join("hf"),
        &["--worker", &address],
        &[("CAKE_CLUSTER_KEY", "correct horse battery")],
    );
    let chat = serde_json::json!({"model": "default", "messages": [{"role": "user", "content": "Hi"}],
                                  "temperature": 0, "max_tokens": 8});
    let (status, reply) = server.post("/v1/chat/completions", &chat);
    assert_eq!(status, 200, "{claim}: {reply}");
    let (_, cluster) = server.post("/app/cluster_status", &serde_json::json!({}));
    let rogue = &cluster["run"]["stages"].as_array().unwrap().iter().find(|s| s["node"] == "rogue").cloned();
    let rogue = rogue.as_ref().unwrap_or_else(|| panic!("{cluster}"));
    assert!(rogue["layers"][1].as_u64() > rogue["layers"][0].as_u64(), "{claim}: its claim won it layers: {cluster}");
    if claim == "CPU" {
        assert_eq!(rogue["claimed_bytes_per_second"], 1e12);
        assert!(rogue["speed_doubt"].as_str().unwrap().contains("claims 1000.0 GB/s"), "{cluster}");
    } else {
        assert!(!rogue["gpu_layers"].as_array().unwrap().is_empty(), "{cluster}");
        assert!(rogue["claimed_bytes_per_second"].as_f64().unwrap() > 1e11, "{cluster}");
        assert!(rogue["speed_doubt"].as_str().unwrap().contains("claims"), "{cluster}");
    }
    assert!(rogue["measured_bytes_per_second"].as_f64().unwrap() < 1e10, "{claim}: {cluster}");

    // Loaded again, the model is planned with the measured speed: the slow worker gets far less.
    let (status, answer) = server.post("/app/unload_model", &serde_json::json!({}));
    assert_eq!(status, 200, "{answer}");
    let (status, events) = server.stream("/app/load_model", &serde_json::json!({"id": "default"}), |_, _| true);
    assert_eq!(status, 200, "{events:?}");
    let (_, cluster) = server.post("/app/cluster_status", &serde_json::json!({}));
    let replanned =
        cluster["run"]["stages"].as_array().unwrap().iter().find(|s| s["node"] == "rogue").cloned().unwrap();
    let count = |stage: &serde_json::Value| stage["layers"][1].as_u64().unwrap() - stage["layers"][0].as_u64().unwrap();
    assert!(
        count(&replanned) * 4 <= count(rogue),
        "{claim}: {} layers then {}: {cluster}",
        count(rogue),
        count(&replanned)
    );
    assert!(!replanned["reason"].as_str().unwrap().contains("1000.0 GB/s"), "{claim}: {cluster}");
}

#[test]
fn a_worker_that_takes_no_connections_is_unreachable_not_rejected() {
    // A port nobody listens on: bound, then closed.
    let address = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().to_string();
    let err = RemoteWorker::connect(&address, &key("correct horse battery")).err().unwrap();
    assert!(err.downcast_ref::<cake::cluster::remote::Unreachable>().is_some(), "{err:#}");
    assert!(format!("{err:#}").contains(&address), "{err:#}");
}

/// A master holding the key that claims, in the config.json it sends, a
/// context of 2^22 tokens is refused at load with what that would take;
/// steps longer than a prompt chunk are refused too. The worker stays up
/// and another master's session goes on.
#[test]
fn a_context_beyond_the_workers_memory_is_refused_and_other_sessions_go_on() {
    let worker = Worker::start("correct horse battery", "bounded", Some(32 << 20));
    let model = common::fixture("tiny/llama_tied");
    let width = Checkpoint::open(&model).unwrap().config().hidden_size;
    let mut other = master_channel(&worker.address);
    let loaded = load_fully(&mut other, &model, &load_layer_one(&model, 128));
    assert!(matches!(loaded, Response::Loaded { .. }), "{loaded:?}");
    let (forward, payload) = step(width, 4, WireFormat::F32);
    assert!(matches!(ask(&mut other, &forward, &payload), Response::Hidden { .. }));

    // The same weights, with a config claiming 2^22 positions.
    let claimed = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(&model).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), claimed.path().join(entry.file_name())).unwrap();
    }
    let config_path = claimed.path().join("config.json");
    let mut config: serde_json::Value = serde_json::from_slice(&std::fs::read(&config_path).unwrap()).unwrap();
    config["max_position_embeddings"] = serde_json::json!(1 << 22);
    std::fs::write(&config_path, config.to_string()).unwrap();
    let mut attacker = master_channel(&worker.address);
    let refused = load_fully(&mut attacker, claimed.path(), &load_layer_one(claimed.path(), 1 << 22));
    assert_refused(refused, "this worker offers 0.034 GB");
    // A context that fits, then a step of more positions than a prompt chunk, in f16.
    let loaded = load_fully(&mut attacker, claimed.path(), &load_layer_one(claimed.path(), 4096));
    assert!(matches!(loaded, Response::Loaded { .. }), "{loaded:?}");
    let (too_long, payload) = step(width, 4000, WireFormat::F16);
    assert_refused(ask(&mut attacker, &too_long, &payload), "more than the 512 one step may carry");

    let (forward, payload) = step(width, 1, WireFormat::F32);
    assert!(matches!(ask(&mut other, &forward, &payload), Response::Hidden { .. }), "the other session goes on");
    let mut worker = worker;
    assert!(worker.child.try_wait().unwrap().is_none(), "the worker process is still running");
}

/// A worker asking for one chunk 100 000 times gets it once; one that asks
/// again and again is given up on after twice its manifest's bytes.
#[test]
fn a_worker_asking_for_chunks_again_and_again_gets_at_most_twice_its_weights() {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    for always in [false, true] {
        let (loads, sent, manifest_bytes) =
            (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let counters = (loads.clone(), sent.clone(), manifest_bytes.clone());
        let (address, _worker) = rogue_worker(move |request, payload| match request {
            Request::Info => (rogue_info(1 << 30, 1e12), vec![]),
            Request::Load { manifest, start, end, .. } => {
                counters.2.store(manifest.total_bytes(), Ordering::Relaxed);
                if counters.0.fetch_add(1, Ordering::Relaxed) > 0 && !always {
                    return (Response::Loaded { start: *start, end: *end, inbox: 0 }, vec![]);
                }
                (Response::NeedChunks { chunks: vec![manifest.chunks()[0]; 100_000] }, vec![])
            }
            Request::Chunk { chunk, .. } => {
                counters.1.fetch_add(chunk.len, Ordering::Relaxed);
                (Response::Done, vec![])
            }
            Request::Forward { shape, format, .. } => (
                Response::Hidden { shape: shape.clone(), format: *format, compute_nanos: 1, kv_bytes: 0 },
                payload.to_vec(),
            ),
            _ => (Response::Done, vec![]),
        });
        let (ok, err) = run_over(&address);
        let (sent, manifest_bytes) = (sent.load(Ordering::Relaxed), manifest_bytes.load(Ordering::Relaxed));
        assert!(manifest_bytes > 0, "{err}");
        if always {
            let gave_up = ["more than 2 times its weights", "still lacks weights after they were sent"];
            assert!(!ok && gave_up.iter().any(|e| err.contains(e)), "{err}");
            assert!(sent <= 2 * manifest_bytes, "{sent} bytes sent for a manifest of {manifest_bytes}");
        } else {
            assert!(ok, "{err}");
            assert!(sent <= manifest_bytes, "{sent} bytes sent for a manifest of {manifest_bytes}");
        }
    }
}

/// A route whose next hop is another service (here one that greets with
/// an SSH banner) is refused, and nothing of what it sent comes back.
#[test]
fn a_route_hop_to_a_port_that_is_not_a_worker_is_refused_without_its_bytes() {
    let banner = TcpListener::bind("127.0.0.1:0").unwrap();
    let banner_address = banner.local_addr().unwrap().to_string();
    thread::spawn(move || {
        for stream in banner.incoming().take(4) {
            let Ok(mut stream) = stream else { continue };
            let _ = stream.write_all(b"SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3\r\n");
            thread::sleep(Duration::from_secs(2));
        }
    });
    let worker = Worker::start("correct horse battery", "hopper", None);
    let model = common::fixture("tiny/llama_tied");
    let width = Checkpoint::open(&model).unwrap().config().hidden_size;
    let mut channel = master_channel(&worker.address);
    let loaded = load_fully(&mut channel, &model, &load_layer_one(&model, 128));
    assert!(matches!(loaded, Response::Loaded { .. }), "{loaded:?}");
    let (Request::Forward { sequence, shape, format, .. }, payload) = step(width, 1, WireFormat::F32) else {
        unreachable!()
    };
    let route = vec![Hop { address: banner_address.clone(), inbox: 1 }];
    let answer = ask(&mut channel, &Request::Forward { sequence, shape, format, route, mutual: vec![] }, &payload);
    let Response::RelayFailed { next, reason } = answer else { panic!("{answer:?}") };
    assert_eq!(next, banner_address);
    assert!(reason.contains("not a worker of this cluster"), "{reason}");
    for leak in ["SSH", "83, 83, 72", "OpenSSH"] {
        assert!(!reason.contains(leak), "the hop's bytes came back: {reason}");
    }
}
