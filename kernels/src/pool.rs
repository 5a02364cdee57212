//! Threads that stay warm between kernel calls.
//!
//! A decode step runs a few hundred small products, each worth tens of
//! microseconds: waking sleeping threads for each would cost as much as the
//! work. The pool's threads spin briefly after a job, waiting for the next,
//! and only then sleep. The caller takes a share of every job itself.
//!
//! Each thread works through its own contiguous share from the front, so
//! each reads the weights in order. A thread done with its share takes
//! chunks from the back of the others': a helper that starts late (its core
//! was busy, or it was asleep) then leaves less for the rest to wait on.
//! A helper that has not started by the time every item is claimed is not
//! waited for at all: the caller closes the job, and the helper, when its
//! core comes back, finds it closed and leaves it alone. Where more
//! threads want the cores than there are (other programs, or cluster
//! workers on the same machine), a step then never waits for a helper's
//! turn on a core.

use std::cell::UnsafeCell;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long an idle thread spins before it sleeps, unless
/// `CAKE_KERNEL_SPIN_US` says otherwise. Long enough to span the gaps
/// between the products of a decode step, short enough not to hold a core
/// when the process waits (e.g. for another machine of the cluster).
const DEFAULT_SPIN: Duration = Duration::from_micros(150);

fn spin_time() -> Duration {
    static SPIN: OnceLock<Duration> = OnceLock::new();
    *SPIN.get_or_init(|| {
        std::env::var("CAKE_KERNEL_SPIN_US")
            .ok()
            .and_then(|v| v.parse().ok())
            .map_or(DEFAULT_SPIN, Duration::from_micros)
    })
}

/// How many rounds the caller spins for its helpers to finish a job before
/// it yields its core between checks: a helper that is late is usually
/// waiting for a core, maybe this one.
const CALLER_SPINS: u32 = 1 << 10;

static REQUESTED_THREADS: AtomicUsize = AtomicUsize::new(0);

/// Sets the number of threads (caller included) of the pool [`global`]
/// builds; returns false if it is already built.
pub fn set_threads(n: usize) -> bool {
    REQUESTED_THREADS.store(n.max(1), Ordering::SeqCst);
    GLOBAL.get().is_none()
}

static GLOBAL: OnceLock<Pool> = OnceLock::new();

/// The process's pool: as many threads as [`set_threads`] asked for, else
/// as many as the machine has cores.
pub fn global() -> &'static Pool {
    GLOBAL.get_or_init(|| {
        let requested = REQUESTED_THREADS.load(Ordering::SeqCst);
        let threads =
            if requested > 0 { requested } else { std::thread::available_parallelism().map_or(1, |n| n.get()) };
        Pool::new(threads)
    })
}

/// A job as the threads see it: the work with its lifetime erased (the
/// caller waits until every thread is done with it) and its item count.
#[derive(Clone, Copy)]
struct Job {
    work: *const (dyn Fn(Range<usize>) + Sync),
    items: usize,
}

/// The items of one thread's share not yet claimed, `front..back`, packed
/// into one word (front in the high half) so that the owner (from the
/// front) and others (from the back) claim with one compare-and-swap.
#[repr(align(64))]
struct Share(AtomicU64);

impl Share {
    fn new() -> Self {
        Self(AtomicU64::new(0))
    }

    fn set(&self, items: Range<usize>) {
        self.0.store(pack(items.start, items.end), Ordering::Relaxed);
    }

    /// Claims up to `n` items from the front.
    fn take_front(&self, n: usize) -> Option<Range<usize>> {
        self.take(|front, back| front..(front + n).min(back))
    }

    /// Claims up to `n` items from the back.
    fn take_back(&self, n: usize) -> Option<Range<usize>> {
        self.take(|front, back| back.saturating_sub(n).max(front)..back)
    }

    fn take(&self, claim: impl Fn(usize, usize) -> Range<usize>) -> Option<Range<usize>> {
        let mut current = self.0.load(Ordering::Relaxed);
        loop {
            let (front, back) = unpack(current);
            if front >= back {
                return None;
            }
            let taken = claim(front, back);
            let rest = if taken.start == front { pack(taken.end, back) } else { pack(front, taken.start) };
            match self.0.compare_exchange_weak(current, rest, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return Some(taken),
                Err(now) => current = now,
            }
        }
    }
}

fn pack(front: usize, back: usize) -> u64 {
    ((front as u64) << 32) | back as u64
}

fn unpack(word: u64) -> (usize, usize) {
    ((word >> 32) as usize, (word & 0xFFFF_FFFF) as usize)
}

/// Items claimed at a time: an eighth of a share, so that a late thread's
/// share is mostly left to take.
fn chunk(items: usize, threads: usize) -> usize {
    (items / threads / 8).max(1)
}

struct Shared {
    threads: usize,
    /// Each thread's share of the current job.
    shares: Vec<Share>,
    /// Bumped for each job; threads wait for it to change.
    generation: AtomicUsize,
    job: UnsafeCell<Option<Job>>,
    /// Which job helpers may still join, how many have joined, and whether
    /// it is closed to more (see [`Entry`]).
    entry: AtomicU64,
    /// Helpers that joined the current job and are done with it.
    finished: AtomicUsize,
    panicked: AtomicBool,
    sleeping: AtomicUsize,
    lock: Mutex<()>,
    wake: Condvar,
}

// SAFETY: `job` is written only by the caller holding `Pool::busy` before it
// bumps `generation`, and read by helpers after they see the new value; the
// work it points to is `Sync` and outlives the job.
unsafe impl Sync for Shared {}
unsafe impl Send for Shared {}

/// A fixed set of threads that run jobs split into contiguous shares.
pub struct Pool {
    shared: Arc<Shared>,
    busy: Mutex<()>,
}

/// Thread `index`'s share of `items` among `threads`.
fn share(items: usize, index: usize, threads: usize) -> Range<usize> {
    items * index / threads..items * (index + 1) / threads
}

impl Pool {
    /// A pool of `threads` threads, the caller counted as one.
    pub fn new(threads: usize) -> Self {
        let shared = Arc::new(Shared {
            threads: threads.max(1),
            shares: (0..threads.max(1)).map(|_| Share::new()).collect(),
            generation: AtomicUsize::new(0),
            job: UnsafeCell::new(None),
            entry: AtomicU64::new(Entry { generation: 0, joined: 0, closed: true }.pack()),
            finished: AtomicUsize::new(0),
            panicked: AtomicBool::new(false),
            sleeping: AtomicUsize::new(0),
            lock: Mutex::new(()),
            wake: Condvar::new(),
        });
        for index in 1..shared.threads {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name(format!("cake-kernel-{index}"))
                .spawn(move || helper(&shared, index))
                .expect("cannot start a kernel thread");
        }
        Self { shared, busy: Mutex::new(()) }
    }

    pub fn threads(&self) -> usize {
        self.shared.threads
    }

    /// Calls `work` on disjoint contiguous ranges that cover `0..items`,
    /// on the pool's threads (each may take several, see the module doc),
    /// and returns when all are done. If another job is running
    /// (another thread of the process is using the pool), runs it all on the
    /// calling thread instead. A panic in the work is raised here.
    pub fn run(&self, items: usize, work: &(dyn Fn(Range<usize>) + Sync)) {
        assert!(items <= u32::MAX as usize, "{items} items in one job (a share packs its bounds in 32 bits)");
        let shared = &*self.shared;
        let guard = match self.busy.try_lock() {
            Ok(guard) if shared.threads > 1 && items > 1 => guard,
            _ => return work(0..items),
        };
        // SAFETY: only the holder of `busy` writes the job, and no helper
        // reads it until `generation` changes below.
        let erased: *const (dyn Fn(Range<usize>) + Sync + '_) = work;
        unsafe {
            // Only the lifetime changes: the job is gone before `work` is.
            let work = std::mem::transmute::<
                *const (dyn Fn(Range<usize>) + Sync + '_),
                *const (dyn Fn(Range<usize>) + Sync + 'static),
            >(erased);
            *shared.job.get() = Some(Job { work, items });
        }
        for (index, own) in shared.shares.iter().enumerate() {
            own.set(share(items, index, shared.threads));
        }
        shared.finished.store(0, Ordering::SeqCst);
        let generation = shared.generation.load(Ordering::SeqCst).wrapping_add(1);
        shared.entry.store(Entry { generation: generation as u32, joined: 0, closed: false }.pack(), Ordering::SeqCst);
        shared.generation.store(generation, Ordering::SeqCst);
        if shared.sleeping.load(Ordering::SeqCst) > 0 {
            let _lock = shared.lock.lock().unwrap_or_else(|e| e.into_inner());
            shared.wake.notify_all();
        }
        let own = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work_on_shares(shared, 0, items, work)));
        // Every item is claimed now: helpers that have not joined never will.
        let joined = Entry::unpack(shared.entry.fetch_or(CLOSED, Ordering::AcqRel)).joined;
        let mut spins = 0u32;
        while shared.finished.load(Ordering::Acquire) != joined {
            spins += 1;
            if spins < CALLER_SPINS {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        let helper_panicked = shared.panicked.swap(false, Ordering::SeqCst);
        drop(guard);
        if let Err(payload) = own {
            std::panic::resume_unwind(payload);
        }
        assert!(!helper_panicked, "a kernel thread panicked");
    }
}

impl Pool {
    /// Calls `work(i, chunk)` for each chunk `i` of `out` (`chunk` values
    /// each, the last maybe fewer) on the pool's threads: a job whose
    /// items each write their own part of one buffer.
    pub fn for_each_chunk<T: Send>(&self, out: &mut [T], chunk: usize, work: &(dyn Fn(usize, &mut [T]) + Sync)) {
        assert!(chunk > 0, "chunks of no values");
        struct Base<T>(*mut T);
        // SAFETY: items write disjoint chunks of the buffer (below).
        unsafe impl<T: Send> Sync for Base<T> {}
        let (len, base) = (out.len(), Base(out.as_mut_ptr()));
        self.run(len.div_ceil(chunk), &|items| {
            let base = &base;
            for i in items {
                let start = i * chunk;
                let end = (start + chunk).min(len);
                // SAFETY: chunk `i` lies inside `out`, and only item `i` touches it.
                let part = unsafe { std::slice::from_raw_parts_mut(base.0.add(start), end - start) };
                work(i, part);
            }
        });
    }
}

/// Where helpers join a job: packed into one word so that joining and
/// closing exclude each other with one atomic operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    /// The low half of the job's `generation`.
    generation: u32,
    /// Helpers that joined it.
    joined: usize,
    /// The caller claimed its last item: no helper may join any more.
    closed: bool,
}

const CLOSED: u64 = 1 << 31;

impl Entry {
    fn pack(self) -> u64 {
        ((self.generation as u64) << 32) | if self.closed { CLOSED } else { 0 } | self.joined as u64
    }

    fn unpack(word: u64) -> Self {
        Self { generation: (word >> 32) as u32, joined: (word & (CLOSED - 1)) as usize, closed: word & CLOSED != 0 }
    }
}

/// Joins job `generation` if it is still open (counted in `entry`); false
/// when it is closed or already replaced by the next.
fn join(shared: &Shared, generation: usize) -> bool {
    let mut word = shared.entry.load(Ordering::Acquire);
    loop {
        let entry = Entry::unpack(word);
        if entry.closed || entry.generation != generation as u32 {
            return false;
        }
        let joined = Entry { joined: entry.joined + 1, ..entry }.pack();
        match shared.entry.compare_exchange_weak(word, joined, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return true,
            Err(now) => word = now,
        }
    }
}

fn helper(shared: &Shared, index: usize) {
    let mut seen = 0usize;
    loop {
        seen = wait_for_job(shared, seen);
        if !join(shared, seen) {
            continue;
        }
        // SAFETY: the caller wrote the job before bumping `generation` and
        // keeps it (and the work it points to) alive until every helper
        // that joined it has finished.
        let job = unsafe { (*shared.job.get()).expect("a job was posted") };
        let work = unsafe { &*job.work };
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work_on_shares(shared, index, job.items, work)))
            .is_err()
        {
            shared.panicked.store(true, Ordering::SeqCst);
        }
        shared.finished.fetch_add(1, Ordering::Release);
    }
}

/// Thread `index`'s part of a job: its own share from the front, then what
/// is left of the others' from their backs.
fn work_on_shares(shared: &Shared, index: usize, items: usize, work: &(dyn Fn(Range<usize>) + Sync)) {
    let n = chunk(items, shared.threads);
    while let Some(range) = shared.shares[index].take_front(n) {
        work(range);
    }
    for other in (1..shared.threads).map(|k| (index + k) % shared.threads) {
        while let Some(range) = shared.shares[other].take_back(n) {
            work(range);
        }
    }
}

/// Spins, then sleeps, until `generation` moves past `seen`; returns it.
fn wait_for_job(shared: &Shared, seen: usize) -> usize {
    let started = Instant::now();
    let mut spins = 0u32;
    loop {
        let now = shared.generation.load(Ordering::Acquire);
        if now != seen {
            return now;
        }
        spins += 1;
        if !spins.is_multiple_of(64) {
            std::hint::spin_loop();
            continue;
        }
        if started.elapsed() < spin_time() {
            // Let another thread waiting for this core (of this process or
            // another, say a cluster worker on the same machine) run.
            std::thread::yield_now();
            continue;
        }
        let mut lock = shared.lock.lock().unwrap_or_else(|e| e.into_inner());
        shared.sleeping.fetch_add(1, Ordering::SeqCst);
        while shared.generation.load(Ordering::SeqCst) == seen {
            lock = shared.wake.wait(lock).unwrap_or_else(|e| e.into_inner());
        }
        shared.sleeping.fetch_sub(1, Ordering::SeqCst);
        return shared.generation.load(Ordering::Acquire);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    #[test]
    fn every_item_is_visited_once_across_many_jobs() {
        let pool = Pool::new(3);
        for items in [0, 1, 2, 5, 64, 1001] {
            let visits: Vec<AtomicU64> = (0..items).map(|_| AtomicU64::new(0)).collect();
            pool.run(items, &|range| {
                for i in range {
                    visits[i].fetch_add(1, Ordering::Relaxed);
                }
            });
            assert!(visits.iter().all(|v| v.load(Ordering::Relaxed) == 1), "{items} items");
        }
    }

    #[test]
    fn each_chunk_is_written_once_by_its_item() {
        let pool = Pool::new(3);
        for (len, chunk) in [(0, 4), (1, 4), (10, 3), (1000, 7), (64, 64)] {
            let mut out = vec![usize::MAX; len];
            pool.for_each_chunk(&mut out, chunk, &|i, part| {
                assert!(part.len() <= chunk);
                part.iter_mut().enumerate().for_each(|(j, v)| *v = i * chunk + j);
            });
            assert_eq!(out, (0..len).collect::<Vec<_>>(), "{len} values in chunks of {chunk}");
        }
    }

    #[test]
    fn the_caller_takes_the_items_a_slow_helper_has_not_claimed() {
        let pool = Pool::new(2);
        let caller = std::thread::current().id();
        let by_caller = AtomicU64::new(0);
        pool.run(64, &|range| {
            if std::thread::current().id() == caller {
                by_caller.fetch_add(range.len() as u64, Ordering::Relaxed);
            } else {
                std::thread::sleep(Duration::from_millis(200));
            }
        });
        // The helper claims at most its first chunk (4 items) in the 200 ms
        // the caller needs for all the others; fixed halves would give 32.
        assert!(by_caller.load(Ordering::Relaxed) >= 60, "the caller did {by_caller:?} of 64 items");
    }

    #[test]
    fn shares_hand_out_each_item_once_from_either_end() {
        let share = Share::new();
        share.set(3..13);
        assert_eq!(share.take_front(4), Some(3..7));
        assert_eq!(share.take_back(4), Some(9..13));
        assert_eq!(share.take_back(4), Some(7..9));
        assert_eq!(share.take_front(4), None);
        assert_eq!(share.take_back(1), None);
    }

    #[test]
    fn helpers_join_an_open_job_only_and_closing_counts_those_that_did() {
        let pool = Pool::new(1);
        let shared = &*pool.shared;
        shared.entry.store(Entry { generation: 7, joined: 0, closed: false }.pack(), Ordering::SeqCst);
        assert!(join(shared, 7) && join(shared, 7));
        assert!(!join(shared, 6), "a helper that saw an earlier job joins none");
        let closing = Entry::unpack(shared.entry.fetch_or(CLOSED, Ordering::AcqRel));
        assert_eq!(closing, Entry { generation: 7, joined: 2, closed: false });
        assert!(!join(shared, 7), "a helper late for a closed job leaves it alone");
        let generation = (u32::MAX as usize) + 8;
        shared.entry.store(Entry { generation: generation as u32, joined: 0, closed: false }.pack(), Ordering::SeqCst);
        assert!(join(shared, generation), "generations past 32 bits compare by their low half");
    }

    #[test]
    fn sleeping_threads_wake_for_the_next_job() {
        let pool = Pool::new(2);
        let total = AtomicU64::new(0);
        pool.run(10, &|r| {
            total.fetch_add(r.len() as u64, Ordering::Relaxed);
        });
        std::thread::sleep(spin_time() * 20);
        pool.run(10, &|r| {
            total.fetch_add(r.len() as u64, Ordering::Relaxed);
        });
        assert_eq!(total.load(Ordering::Relaxed), 20);
    }

    #[test]
    fn a_panic_in_a_helper_reaches_the_caller_and_the_pool_still_works() {
        let pool = Pool::new(2);
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            pool.run(2, &|r| {
                if r.start == 1 {
                    panic!("boom");
                }
            })
        }));
        assert!(result.is_err());
        let count = AtomicU64::new(0);
        pool.run(4, &|r| {
            count.fetch_add(r.len() as u64, Ordering::Relaxed);
        });
        assert_eq!(count.load(Ordering::Relaxed), 4);
    }
}
