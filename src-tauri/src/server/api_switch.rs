//! The desktop app's "Serve the OpenAI API" switch: the same routes as
//! `cake serve` (the OpenAI-compatible `/v1` API among them) on
//! `127.0.0.1`, for other programs on this computer, always behind an API
//! key that Cake makes and shows. Whether it is on, and on which port, is
//! kept in the data folder and applies again at the next start; the key is
//! kept in a file only the user can read.

use crate::app::App;
use crate::files::storage::{read_trimmed, write_json_atomically, write_private_atomically};
use crate::server::background::BackgroundServer;
use anyhow::{Context, Result};
use rand::distr::{Alphanumeric, SampleString};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// The port used until the person picks another (`cake serve`'s default).
pub const DEFAULT_PORT: u16 = 8080;
/// Characters of a key Cake makes (letters and digits: about 190 bits).
const KEY_CHARS: usize = 32;

/// What is kept between runs.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
struct Settings {
    enabled: bool,
    port: u16,
}

impl Default for Settings {
    fn default() -> Self {
        Self { enabled: false, port: DEFAULT_PORT }
    }
}

/// What the UI shows.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ApiStatus {
    pub enabled: bool,
    pub port: u16,
    /// `http://127.0.0.1:<port>/v1` while serving.
    pub base_url: Option<String>,
    /// The key clients send (`Authorization: Bearer …`), while serving.
    pub api_key: Option<String>,
    /// Why it is not serving although switched on (the port was taken).
    pub error: Option<String>,
}

/// The switch and the server it runs.
pub struct OpenAiApi {
    app: Arc<App>,
    settings_file: PathBuf,
    key_file: PathBuf,
    state: Mutex<Running>,
}

#[derive(Default)]
struct Running {
    settings: Settings,
    /// The server and the key it asks for, while serving.
    server: Option<(BackgroundServer, String)>,
    error: Option<String>,
}

impl OpenAiApi {
    /// The switch over `app`, its settings in the app's data folder; starts
    /// serving if it was on when Cake last ran.
    pub fn new(app: Arc<App>) -> Self {
        let dir = app.catalog.data_dir().to_path_buf();
        let settings_file = dir.join("openai_api.json");
        let settings = std::fs::read(&settings_file)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default();
        let api =
            Self { app, settings_file, key_file: dir.join("openai_api_key"), state: Mutex::new(Running::default()) };
        if let Err(e) = api.apply(settings) {
            tracing::warn!("the OpenAI API was not started: {e:#}");
        }
        api
    }

    /// What is on, and where.
    pub fn status(&self) -> ApiStatus {
        let state = self.lock();
        ApiStatus {
            enabled: state.settings.enabled,
            port: state.settings.port,
            base_url: state.server.as_ref().map(|(server, _)| format!("http://{}/v1", server.address())),
            api_key: state.server.as_ref().map(|(_, key)| key.clone()),
            error: state.error.clone(),
        }
    }

    /// Switches serving on or off (on `port`, 0 keeping the current one),
    /// and keeps the choice for the next start.
    pub fn set(&self, enabled: bool, port: u16) -> Result<ApiStatus> {
        let port = if port == 0 { self.lock().settings.port } else { port };
        let settings = Settings { enabled, port };
        write_json_atomically(&self.settings_file, &settings)
            .with_context(|| format!("cannot save {}", self.settings_file.display()))?;
        self.apply(settings)?;
        Ok(self.status())
    }

    /// Starts or stops the server to match `settings`.
    fn apply(&self, settings: Settings) -> Result<()> {
        let mut state = self.lock();
        state.settings = settings;
        state.error = None;
        // Stopped first, so that a restart on the same port finds it free.
        state.server = None;
        if !settings.enabled {
            return Ok(());
        }
        let started = self
            .key()
            .and_then(|key| Ok((BackgroundServer::start(self.app.clone(), settings.port, key.clone())?, key)));
        match started {
            Ok((server, key)) => {
                tracing::info!("serving the OpenAI API on http://{}/v1", server.address());
                state.server = Some((server, key));
                Ok(())
            }
            Err(e) => {
                state.error = Some(format!("{e:#}"));
                Err(e)
            }
        }
    }

    /// The stored key, made and stored first if there is none.
    fn key(&self) -> Result<String> {
        let stored = read_trimmed(&self.key_file)
            .with_context(|| format!("cannot read the API key from {}", self.key_file.display()))?;
        if let Some(key) = stored {
            return Ok(key);
        }
        let key = Alphanumeric.sample_string(&mut rand::rng(), KEY_CHARS);
        write_private_atomically(&self.key_file, key.as_bytes())
            .with_context(|| format!("cannot save the API key in {}", self.key_file.display()))?;
        Ok(key)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Running> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::library::catalog::Catalog;
    use crate::server::background::tests::status_of;
    use crate::text::model::LoadOptions;
    use std::net::{SocketAddr, TcpStream};
    use std::time::Duration;

    fn app_in(dir: &std::path::Path) -> Arc<App> {
        Arc::new(App::new(Catalog::new(dir.join("data"), dir.join("hf")), LoadOptions::default()))
    }

    fn free_port() -> u16 {
        std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap().local_addr().unwrap().port()
    }

    /// `GET /v1/models`'s status code at `base_url` (`http://host:port/v1`) with `key`.
    fn models_status(base_url: &str, key: &str) -> u16 {
        status_of(address_of(base_url), "/v1/models", Some(key)).unwrap()
    }

    fn address_of(base_url: &str) -> SocketAddr {
        base_url.trim_start_matches("http://").trim_end_matches("/v1").parse().unwrap()
    }

    #[test]
    fn switched_on_it_serves_with_a_private_key_and_comes_back_at_the_next_start() {
        let dir = tempfile::tempdir().unwrap();
        let api = OpenAiApi::new(app_in(dir.path()));
        let off = api.status();
        assert_eq!((off.enabled, off.port, off.base_url, off.api_key), (false, DEFAULT_PORT, None, None));

        let port = free_port();
        let on = api.set(true, port).unwrap();
        let base_url = on.base_url.clone().unwrap();
        assert_eq!(base_url, format!("http://127.0.0.1:{port}/v1"));
        let key = on.api_key.clone().unwrap();
        assert_eq!(key.len(), KEY_CHARS);
        assert_eq!(models_status(&base_url, &key), 200);
        assert_eq!(models_status(&base_url, "not-the-key-but-long-enough"), 401);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join("data/openai_api_key")).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }

        // The next start serves again, with the same key.
        drop(api);
        let again = OpenAiApi::new(app_in(dir.path()));
        assert_eq!(again.status(), on);
        assert_eq!(models_status(&base_url, &key), 200);

        let off = again.set(false, 0).unwrap();
        assert_eq!((off.enabled, off.port, off.base_url), (false, port, None));
        assert!(TcpStream::connect_timeout(&address_of(&base_url), Duration::from_secs(2)).is_err());
    }

    #[test]
    fn a_taken_port_is_reported_and_kept_as_the_choice() {
        let dir = tempfile::tempdir().unwrap();
        let api = OpenAiApi::new(app_in(dir.path()));
        let taken = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let port = taken.local_addr().unwrap().port();
        let error = api.set(true, port).unwrap_err();
        assert!(format!("{error:#}").contains(&format!("127.0.0.1:{port}")), "{error:#}");
        let status = api.status();
        assert!(status.enabled && status.base_url.is_none());
        assert!(status.error.unwrap().contains("cannot listen"));
    }
}
