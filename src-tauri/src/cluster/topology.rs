//! A hand-written cluster layout that overrides automatic layer assignment.
//!
//! The file is YAML: one entry per worker, by name, with its address, an
//! optional description and optionally the layers it must run. Workers
//! listed without layers (and the master) share the remaining layers
//! automatically.
//!
//! ```yaml
//! desktop:
//!   host: 192.168.1.20:10128
//!   description: the big one
//!   layers: ["model.layers.0-11"]     # inclusive; "model.layers.12" is one layer
//! laptop:
//!   host: 192.168.1.21:10128          # no layers: gets a share of the rest
//! ```

use anyhow::{bail, Context, Result};
use serde::Deserialize;
use std::ops::Range;
use std::path::Path;

/// One worker of the topology file.
#[derive(Debug, Clone, PartialEq)]
pub struct TopologyNode {
    pub name: String,
    /// host:port of its worker.
    pub host: String,
    pub description: Option<String>,
    /// The layers it must run, when the file says.
    pub layers: Option<Range<usize>>,
}

/// The workers of a topology file, in file order.
#[derive(Debug, Clone, PartialEq)]
pub struct Topology {
    pub nodes: Vec<TopologyNode>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NodeEntry {
    host: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    layers: Vec<String>,
}

/// The largest file accepted (a topology is a few lines).
const MAX_FILE_BYTES: u64 = 1 << 20;

impl Topology {
    /// Reads and checks a topology file.
    pub fn from_file(path: &Path) -> Result<Self> {
        let size = std::fs::metadata(path)
            .with_context(|| format!("{}: cannot read the topology file", path.display()))?
            .len();
        if size > MAX_FILE_BYTES {
            bail!("{}: {size} bytes is too large for a topology file", path.display());
        }
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("{}: cannot read the topology file", path.display()))?;
        Self::parse(&text).with_context(|| format!("{}: invalid topology", path.display()))
    }

    /// Parses topology YAML.
    pub fn parse(text: &str) -> Result<Self> {
        let mapping: serde_yaml::Mapping =
            serde_yaml::from_str(text).context("expected a map from node names to nodes")?;
        let mut nodes = Vec::new();
        for (name, entry) in mapping {
            let name = match name {
                serde_yaml::Value::String(s) => s,
                other => bail!("node names must be strings, found {other:?}"),
            };
            let entry: NodeEntry = serde_yaml::from_value(entry).with_context(|| format!("node `{name}`"))?;
            let layers = layer_range(&entry.layers).with_context(|| format!("node `{name}`"))?;
            nodes.push(TopologyNode { name, host: entry.host, description: entry.description, layers });
        }
        if nodes.is_empty() {
            bail!("the topology lists no nodes");
        }
        Ok(Self { nodes })
    }
}

/// Joins `["model.layers.0-5", "model.layers.6"]` into `0..7`; the parts
/// must form one contiguous range (a machine runs one range).
fn layer_range(specs: &[String]) -> Result<Option<Range<usize>>> {
    let mut parts: Vec<Range<usize>> = specs.iter().map(|s| layer_spec(s)).collect::<Result<_>>()?;
    if parts.is_empty() {
        return Ok(None);
    }
    parts.sort_by_key(|r| r.start);
    let mut joined = parts[0].clone();
    for part in &parts[1..] {
        if part.start != joined.end {
            bail!(
                "layers {}-{} and {}-{} are not contiguous: a machine runs one contiguous range",
                joined.start,
                joined.end - 1,
                part.start,
                part.end - 1
            );
        }
        joined.end = part.end;
    }
    Ok(Some(joined))
}

/// `model.layers.3-7` (inclusive) or `model.layers.3`.
fn layer_spec(spec: &str) -> Result<Range<usize>> {
    let numbers =
        spec.strip_prefix("model.layers.").with_context(|| format!("`{spec}` should look like model.layers.0-5"))?;
    let parse = |s: &str| s.trim().parse::<usize>().with_context(|| format!("`{spec}`: `{s}` is not a layer number"));
    let (first, last) = match numbers.split_once('-') {
        Some((a, b)) => (parse(a)?, parse(b)?),
        None => (parse(numbers)?, parse(numbers)?),
    };
    if last < first {
        bail!("`{spec}`: the range ends before it starts");
    }
    Ok(first..last + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_nodes_in_file_order_with_and_without_layers() {
        let topology = Topology::parse(
            "b:\n  host: 10.0.0.2:1\n  description: big\n  layers: ['model.layers.0-5', 'model.layers.6']\na:\n  host: 10.0.0.1:1\n",
        )
        .unwrap();
        assert_eq!(topology.nodes.len(), 2);
        assert_eq!(topology.nodes[0].name, "b");
        assert_eq!(topology.nodes[0].layers, Some(0..7));
        assert_eq!(topology.nodes[0].description.as_deref(), Some("big"));
        assert_eq!(topology.nodes[1].layers, None);
    }

    #[test]
    fn bad_files_get_clear_errors() {
        for (text, expected) in [
            ("a:\n  host: h:1\n  layers: ['model.layers.0-2', 'model.layers.5']\n", "not contiguous"),
            ("a:\n  host: h:1\n  layers: ['layers.0-2']\n", "should look like"),
            ("a:\n  host: h:1\n  layers: ['model.layers.4-2']\n", "ends before"),
            ("a:\n  host: h:1\n  layers: ['model.layers.x']\n", "not a layer number"),
            ("a:\n  hots: h:1\n", "unknown field"),
            ("- a\n- b\n", "expected a map"),
            ("{}\n", "no nodes"),
        ] {
            let err = format!("{:#}", Topology::parse(text).unwrap_err());
            assert!(err.contains(expected), "{text:?}: {err}");
        }
    }
}
