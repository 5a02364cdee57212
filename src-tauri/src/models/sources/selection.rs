//! Which of a checkpoint's tensors a node needs.
//!
//! A cluster node runs one contiguous range of transformer layers; the first
//! node also embeds tokens and the last applies the final norm and LM head.
//! Tensor names follow Hugging Face's `model.layers.N.` convention.

use std::ops::Range;

/// A contiguous layer range plus the ends of the model a node holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorSelection {
    pub layers: Range<usize>,
    /// Token embedding (`model.embed_tokens`).
    pub embedding: bool,
    /// Final norm and LM head (which may be tied to the embedding).
    pub head: bool,
}

impl TensorSelection {
    /// Every tensor of a model with `num_layers` layers.
    pub fn all(num_layers: usize) -> Self {
        Self { layers: 0..num_layers, embedding: true, head: true }
    }

    /// Whether a tensor of this name belongs to the selection. With
    /// `tied_embeddings` the head reuses the embedding matrix.
    pub fn wants(&self, name: &str, tied_embeddings: bool) -> bool {
        if let Some(layer) = layer_index(name) {
            return self.layers.contains(&layer);
        }
        match name {
            "model.embed_tokens.weight" => self.embedding || (self.head && tied_embeddings),
            "model.norm.weight" | "lm_head.weight" => self.head,
            _ => self.embedding,
        }
    }
}

/// The layer number of a `model.layers.N.…` tensor name.
pub fn layer_index(name: &str) -> Option<usize> {
    let rest = name.strip_prefix("model.layers.")?;
    rest.split('.').next()?.parse().ok()
}

/// Layer indices `[0, 1, 2, 7]` as `0-2, 7`.
pub fn layer_ranges(layers: &[usize]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < layers.len() {
        let mut j = i;
        while j + 1 < layers.len() && layers[j + 1] == layers[j] + 1 {
            j += 1;
        }
        parts.push(if i == j { layers[i].to_string() } else { format!("{}-{}", layers[i], layers[j]) });
        i = j + 1;
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn middle_stage_takes_only_its_layers() {
        let sel = TensorSelection { layers: 2..4, embedding: false, head: false };
        assert!(sel.wants("model.layers.2.mlp.up_proj.weight", false));
        assert!(sel.wants("model.layers.3.self_attn.q_proj.bias", false));
        assert!(!sel.wants("model.layers.4.mlp.up_proj.weight", false));
        assert!(!sel.wants("model.layers.21.mlp.up_proj.weight", false));
        assert!(!sel.wants("model.embed_tokens.weight", true));
        assert!(!sel.wants("lm_head.weight", false));
    }

    #[test]
    fn last_stage_needs_embedding_only_for_tied_heads() {
        let sel = TensorSelection { layers: 2..4, embedding: false, head: true };
        assert!(sel.wants("model.embed_tokens.weight", true));
        assert!(!sel.wants("model.embed_tokens.weight", false));
        assert!(sel.wants("model.norm.weight", false));
        assert!(sel.wants("lm_head.weight", false));
    }
}
