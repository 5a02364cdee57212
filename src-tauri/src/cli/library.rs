//! `cake pull`, `cake list`, `cake rm`: the model library on the command line.

use crate::library::catalog::Catalog;
use crate::library::download::{DownloadError, Downloader};
use anyhow::{bail, Result};
use clap::Args;
use std::io::{BufRead, IsTerminal, Write};

#[derive(Args, Debug)]
pub struct PullArgs {
    /// Hugging Face model id, e.g. HuggingFaceTB/SmolLM2-135M-Instruct.
    pub repo_id: String,
}

#[derive(Args, Debug)]
pub struct ListArgs {
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct RmArgs {
    /// Library id (`hf:org/name`, `default`, `file:/path`) or a Hugging Face id.
    pub id: String,
    /// Do not ask for confirmation.
    #[arg(long, short = 'y')]
    pub yes: bool,
}

pub fn pull(args: PullArgs) -> Result<()> {
    let catalog = Catalog::default();
    let downloader = Downloader::from_env(catalog.hf_cache().to_path_buf());
    let mut last_print = std::time::Instant::now();
    let result = downloader.download(&args.repo_id, &mut |p| {
        if last_print.elapsed().as_millis() > 500 {
            last_print = std::time::Instant::now();
            let eta = p.eta_s.map_or("?".into(), |s| format!("{s:.0} s"));
            eprint!(
                "\r{:>6.1} / {:.1} MB  {:>6.1} MB/s  ETA {eta}  {}   ",
                p.downloaded_bytes as f64 / 1e6,
                p.total_bytes as f64 / 1e6,
                p.bytes_per_s / 1e6,
                p.file
            );
        }
        true
    });
    eprintln!();
    match result {
        Ok(snapshot) => {
            println!("downloaded {} to {}", args.repo_id, snapshot.display());
            Ok(())
        }
        Err(DownloadError::Cancelled) => bail!("cancelled"),
        Err(DownloadError::Failed(e)) => Err(e),
    }
}

pub fn list(args: ListArgs) -> Result<()> {
    let models = Catalog::default().list()?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&models)?);
        return Ok(());
    }
    println!("{:<48} {:<10} {:>8} {:<6} {:<8} {:>10}  STATUS", "ID", "ARCH", "PARAMS", "DTYPE", "QUANT", "SIZE");
    for m in models {
        let params = m.parameters.map_or("-".into(), |p| format!("{:.0}M", p as f64 / 1e6));
        let status = match &m.problem {
            Some(problem) => format!("{:?}: {problem}", m.status),
            None => format!("{:?}", m.status),
        };
        println!(
            "{:<48} {:<10} {:>8} {:<6} {:<8} {:>8.1}MB  {status}",
            m.id,
            m.architecture.as_deref().unwrap_or("-"),
            params,
            m.dtype.as_deref().unwrap_or("-"),
            m.quantization.as_deref().unwrap_or("-"),
            m.size_bytes as f64 / 1e6
        );
    }
    Ok(())
}

pub fn rm(args: RmArgs) -> Result<()> {
    let catalog = Catalog::default();
    let id = if catalog.find(&args.id).is_err() && crate::files::hf_cache::looks_like_repo_id(&args.id) {
        format!("hf:{}", args.id)
    } else {
        args.id.clone()
    };
    let entry = catalog.find(&id)?;
    if !args.yes {
        if !std::io::stdin().is_terminal() {
            bail!("refusing to delete {} without confirmation: pass --yes", entry.id);
        }
        eprint!("delete {} ({:.1} MB at {})? [y/N] ", entry.id, entry.size_bytes as f64 / 1e6, entry.path.display());
        std::io::stderr().flush()?;
        let mut answer = String::new();
        std::io::stdin().lock().read_line(&mut answer)?;
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            bail!("not deleted");
        }
    }
    catalog.delete(&entry.id)?;
    println!("deleted {}", entry.id);
    Ok(())
}
