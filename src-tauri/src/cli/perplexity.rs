//! `cake perplexity`: score a text file or a token list.

use super::{parse_token_list, ModelArgs};
use crate::text::perplexity::perplexity_with;
use crate::text::pictures::AttachedPicture;
use crate::text::turn_prompt::pictures_in;
use anyhow::{bail, Context, Result};
use clap::Args;

#[derive(Args, Debug)]
pub struct PerplexityArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// A UTF-8 text file to score.
    #[arg(long, conflicts_with = "tokens")]
    pub file: Option<std::path::PathBuf>,
    /// Token ids to score, e.g. `1,2,3`.
    #[arg(long)]
    pub tokens: Option<String>,
    /// Print `{"tokens", "nll", "perplexity"}` as JSON.
    #[arg(long)]
    pub json: bool,
    /// A picture the tokens hold (repeatable, in order), for models that
    /// read pictures: each takes the next run of the model's image tokens.
    #[arg(long = "image", value_name = "PATH")]
    pub images: Vec<std::path::PathBuf>,
}

pub fn run(args: PerplexityArgs) -> Result<()> {
    let (model, _) = args.model.load_model()?;
    let tokens = match (&args.file, &args.tokens) {
        (_, Some(list)) => parse_token_list(list)?,
        (Some(file), None) => {
            let text = std::fs::read_to_string(file)
                .with_context(|| format!("cannot read {} as UTF-8 text", file.display()))?;
            model.tokenizer()?.encode(&text, true)?
        }
        (None, None) => bail!("give a text with --file PATH or --tokens 1,2,3"),
    };
    let attached = args.images.iter().map(|path| AttachedPicture::read(path)).collect::<Result<Vec<_>>>()?;
    let pictures = pictures_in(&model, &tokens, &attached.iter().collect::<Vec<_>>())?;
    let result = perplexity_with(&model, &tokens, &pictures)?;
    if args.json {
        println!("{}", serde_json::to_string(&result)?);
    } else {
        println!("{} tokens, perplexity {:.4}", result.tokens.len(), result.perplexity);
    }
    Ok(())
}
