//! Where the library's `tracing` events go: stderr, as plain lines (info
//! as its message, warnings and errors prefixed), filtered by `RUST_LOG`
//! (default: Cake's own info and everyone's warnings); the desktop app
//! also appends them to `cake.log` in its data folder, with time, level
//! and the spans they happened in (an app command, an engine job, a
//! worker's session with one master, the master's contact with a worker).

use std::fmt;
use std::path::Path;
use std::sync::Mutex;
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

const DEFAULT_FILTER: &str = "warn,cake=info";

/// A line per event: `message field=value…`, with `warning: ` or `error: ` first.
struct PlainLines;

impl<S, N> FormatEvent<S, N> for PlainLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(&self, ctx: &FmtContext<'_, S, N>, mut writer: Writer<'_>, event: &Event<'_>) -> fmt::Result {
        match *event.metadata().level() {
            Level::ERROR => write!(writer, "error: ")?,
            Level::WARN => write!(writer, "warning: ")?,
            _ => {}
        }
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}

fn filter() -> EnvFilter {
    EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER))
}

/// Sends events to stderr and, when `log_file` is given, appends them there
/// too (a file that cannot be opened is reported and skipped).
pub fn init(log_file: Option<&Path>) {
    let stderr =
        tracing_subscriber::fmt::layer().event_format(PlainLines).with_ansi(false).with_writer(std::io::stderr);
    let file = log_file.and_then(|path| {
        let opened = std::fs::create_dir_all(path.parent()?)
            .and_then(|()| std::fs::OpenOptions::new().create(true).append(true).open(path));
        match opened {
            Ok(file) => Some(
                tracing_subscriber::fmt::layer().with_ansi(false).with_writer(Mutex::new(file)).with_filter(filter()),
            ),
            Err(e) => {
                eprintln!("warning: cannot write the log file {}: {e}", path.display());
                None
            }
        }
    });
    // A second init (tests calling main_with twice) keeps the first.
    let _ = tracing_subscriber::registry().with(stderr.with_filter(filter())).with(file).try_init();
}
