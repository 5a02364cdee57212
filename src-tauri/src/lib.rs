//! Cake: run language models on one machine or across the machines of a LAN.
//!
//! ## Layers
//!
//! Lowest first. A folder may use only the folders named in its row, all of
//! them from earlier rows, so nothing imports upward and there is no cycle
//! (`layering_tests` below reads every `crate::` path and checks this).
//!
//! | folder | what it holds | may use |
//! |---|---|---|
//! | [`files`] | the data folder, the Hugging Face cache, crash-safe writes | |
//! | [`guesses`] | guesses at a secret over the network, throttled per client address | |
//! | [`startup`] | how Cake starts: the systemd user unit, the XDG autostart entry, one instance per user | files |
//! | [`formats`] | reading checkpoint files (safetensors, GGUF) defensively | |
//! | [`images`] | decoding the pictures people attach, within size caps, upright | |
//! | [`models`] | architectures, weight sources, the shared decoder and its layer pipeline, vision towers | files, formats, images |
//! | [`text`] | tokenizer, chat templates, sampling, generation, perplexity, pictures in prompts | formats, images, models |
//! | [`audio`] | reading, resampling and writing WAV audio | files |
//! | [`cluster`] | running a model across the machines of a LAN | files, formats, guesses, models, text |
//! | [`speech`] | text to speech (VibeVoice 1.5B and Realtime-0.5B) | audio, cluster, files, formats, models, text |
//! | [`library`] | the model list, imports and downloads | files, formats, models, speech, text |
//! | [`app`] | what the window and `cake serve` share: commands, engine thread, conversations, their pictures | audio, cluster, files, formats, images, library, models, speech, text |
//! | [`server`] | `cake serve`: HTTP, the browser UI and the OpenAI-compatible API | app, audio, files, guesses, images, library, speech, text |
//! | `desktop` | the Tauri window and its tray icon (feature `gui`) | app, files, library, server, startup, text |
//! | [`fuzz_targets`] | the readers of untrusted bytes, as the fuzzers drive them | cluster, formats, images, speech, text |
//! | [`cli`] | the `cake` command line | app, audio, cluster, desktop, files, formats, library, models, server, speech, startup, text |

pub mod app;
pub mod audio;
pub mod cli;
pub mod cluster;
#[cfg(feature = "gui")]
pub mod desktop;
pub mod files;
pub mod formats;
pub mod fuzz_targets;
pub mod guesses;
pub mod images;
pub mod library;
pub mod models;
pub mod server;
pub mod speech;
pub mod startup;
pub mod text;

#[cfg(test)]
mod layering_tests {
    use std::collections::{BTreeMap, BTreeSet};
    use std::path::Path;

    /// The layer table at the top of this file: folder → what it may use, in order.
    fn layer_table() -> Vec<(String, BTreeSet<String>)> {
        let source = include_str!("lib.rs");
        source
            .lines()
            .filter_map(|line| line.strip_prefix("//! | "))
            .filter(|row| row.starts_with('`') || row.starts_with("[`"))
            .map(|row| {
                let cells: Vec<&str> = row.split(" | ").collect();
                let folder = cells[0].trim_matches(|c| "[]`".contains(c)).to_string();
                let uses = cells.last().unwrap().trim_end_matches('|').trim();
                let allowed = uses.split(", ").filter(|u| !u.is_empty()).map(str::to_string).collect();
                (folder, allowed)
            })
            .collect()
    }

    /// Every top-level module a file names through `crate::`, outside comments.
    fn used_modules(file: &Path) -> BTreeSet<String> {
        let text = std::fs::read_to_string(file).unwrap();
        let mut used = BTreeSet::new();
        for line in text.lines() {
            let code = line.split("//").next().unwrap();
            for (at, _) in code.match_indices("crate::") {
                let rest = &code[at + "crate::".len()..];
                let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                if !name.is_empty() {
                    used.insert(name);
                }
            }
            assert!(!code.contains("crate::{"), "{}: name modules one `use` at a time", file.display());
        }
        used
    }

    fn rust_files(path: &Path, out: &mut Vec<std::path::PathBuf>) {
        if path.is_dir() {
            for entry in std::fs::read_dir(path).unwrap() {
                rust_files(&entry.unwrap().path(), out);
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path.to_path_buf());
        }
    }

    #[test]
    fn the_layer_table_lists_only_earlier_layers() {
        let table = layer_table();
        assert!(table.len() >= 12, "{table:?}");
        for (index, (folder, allowed)) in table.iter().enumerate() {
            let earlier: BTreeSet<&String> = table[..index].iter().map(|(f, _)| f).collect();
            for used in allowed {
                assert!(earlier.contains(used), "`{folder}` may use `{used}`, which is not in an earlier row");
            }
        }
    }

    #[test]
    fn no_module_imports_a_higher_layer() {
        let table: BTreeMap<String, BTreeSet<String>> = layer_table().into_iter().collect();
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut checked = 0;
        for entry in std::fs::read_dir(&root).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_stem().unwrap().to_string_lossy().to_string();
            if matches!(name.as_str(), "lib" | "main") {
                continue;
            }
            let allowed = table.get(&name).unwrap_or_else(|| panic!("`{name}` is missing from the layer table"));
            let mut files = Vec::new();
            rust_files(&path, &mut files);
            for file in files {
                for used in used_modules(&file) {
                    if used != name {
                        assert!(allowed.contains(&used), "{} uses `{used}`, above `{name}`", file.display());
                    }
                }
                checked += 1;
            }
        }
        assert!(checked > 100, "only {checked} files read");
    }
}
