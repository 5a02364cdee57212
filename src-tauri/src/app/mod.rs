//! What the desktop window and `cake serve` share: the model library, the
//! engine thread, stored conversations, and the commands the UI calls
//! (see docs/api.md). The Tauri shell and the HTTP server are thin
//! transports over [`App::call`] and [`App::stream`].

pub mod chat_streams;
pub mod cluster;
pub mod commands;
pub mod conversations;
pub mod engine;
pub mod error;
pub mod events;
pub mod key_store;
pub mod picture_store;
pub mod request;
pub mod speech_library;

use crate::cluster::master::ClusterSettings;
use crate::library::catalog::Catalog;
use crate::models::gpu_offload::GpuRequest;
use crate::text::model::LoadOptions;
use cluster::ClusterControl;
use conversations::ConversationStore;
use engine::{CancelFlag, Engine};
use picture_store::{PictureStore, UNSENT_PICTURE_LIFETIME};
use speech_library::SpeechLibrary;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The application's state.
pub struct App {
    pub catalog: Catalog,
    pub engine: Engine,
    pub conversations: ConversationStore,
    /// Cluster settings and this machine's role in the cluster.
    pub cluster: ClusterControl,
    /// Stored voice prompts and speech clips.
    pub speech: SpeechLibrary,
    /// The pictures conversations show.
    pub pictures: PictureStore,
    /// Cancel flags of running streams, by the id the UI gave them.
    streams: Arc<Mutex<HashMap<String, CancelFlag>>>,
}

impl App {
    /// The app over `catalog`, keeping conversations in its data folder.
    pub fn new(catalog: Catalog, options: LoadOptions) -> Self {
        Self::with_cluster(catalog, options, None, None)
    }

    /// Like [`App::new`], running models over the workers of `cluster`
    /// (from the command line) instead of the stored cluster settings.
    /// A context length given on the command line wins over the stored one,
    /// and so does a `gpu` request.
    pub fn with_cluster(
        catalog: Catalog,
        mut options: LoadOptions,
        cluster: Option<ClusterSettings>,
        gpu: Option<GpuRequest>,
    ) -> Self {
        sweep_orphans(catalog.data_dir());
        let conversations = ConversationStore::new(catalog.data_dir().join("conversations"));
        let cluster = ClusterControl::open(catalog.data_dir(), cluster);
        let speech = SpeechLibrary::new(catalog.data_dir());
        let pictures = PictureStore::new(catalog.data_dir());
        if let Some(used) = conversations.pictures_used() {
            let forgotten = pictures.forget_unsent(&used, UNSENT_PICTURE_LIFETIME);
            if forgotten > 0 {
                tracing::info!(forgotten, "deleted pictures attached a day ago and never sent");
            }
        }
        options.context_length = options.context_length.or(cluster.context_length());
        options.gpu = gpu.unwrap_or_else(|| cluster.gpu_request());
        Self {
            catalog,
            engine: Engine::start(options, cluster.master_settings()),
            speech,
            pictures,
            conversations,
            cluster,
            streams: Arc::new(Mutex::new(HashMap::new())),
        }
    }
}

/// The folders of the data folder that the app writes files in.
const WRITTEN_FOLDERS: [&str; 5] = ["", "conversations", "voices", "clips", "pictures"];

/// Removes the temporary files that a crash mid-write left in the data
/// folder; a folder that cannot be swept is logged and left.
fn sweep_orphans(data_dir: &std::path::Path) {
    for folder in WRITTEN_FOLDERS.map(|name| data_dir.join(name)) {
        match crate::files::storage::sweep_orphans(&folder) {
            Ok(0) => {}
            Ok(removed) => tracing::info!(folder = %folder.display(), removed, "removed unfinished writes"),
            Err(e) => tracing::warn!(folder = %folder.display(), cause = %format!("{e:#}"), "cannot sweep"),
        }
    }
}
