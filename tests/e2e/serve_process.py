"""A real `cake serve` on a free loopback port, for the SDK client checks."""

import contextlib
import json
import os
import subprocess
from pathlib import Path


def default_model() -> Path:
    data = os.environ.get("CAKE_DATA_DIR") or os.path.join(
        os.environ.get("XDG_DATA_HOME", os.path.expanduser("~/.local/share")), "cake"
    )
    return Path(data) / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"


def data_dir_with_default_model(root: Path) -> Path:
    """`root` made a data folder whose library holds the default model."""
    (root / "models").mkdir()
    (root / "models" / default_model().name).symlink_to(default_model())
    return root


def start_server(cake: str, data_dir: Path, *args: str) -> tuple[subprocess.Popen, str]:
    """Starts `cake serve` with `data_dir`; returns it and its base URL."""
    env = dict(os.environ, CAKE_DATA_DIR=str(data_dir), HF_HUB_CACHE=str(data_dir / "hf"))
    server = subprocess.Popen(
        [cake, "serve", "--host", "127.0.0.1", "--port", "0", *args], stdout=subprocess.PIPE, env=env, text=True
    )
    for _ in range(50):
        line = server.stdout.readline()
        if line.startswith("Cake is serving on "):
            return server, line.removeprefix("Cake is serving on ").strip().rstrip("/")
    server.kill()
    raise SystemExit("cake serve did not start")


@contextlib.contextmanager
def served(cake: str, data_dir: Path, *args: str):
    """`cake serve` running with `data_dir` while the block runs; yields its base URL."""
    server, base = start_server(cake, data_dir, *args)
    try:
        yield base
    finally:
        server.kill()
        server.wait()


def scripted_model() -> Path:
    """The tiny Qwen3 taught to write reasoning blocks and tool calls
    (`tests/fixtures/generate_scripted_model.py`); served as `qwen3_scripted`."""
    return Path(__file__).resolve().parent.parent / "fixtures" / "tiny" / "qwen3_scripted"


def embedding_model() -> Path:
    """The tiny Qwen3-Embedding-shaped fixture (`generate_tiny_embedding.py`); served as `qwen3_embedding`."""
    return Path(__file__).resolve().parent.parent / "fixtures" / "tiny" / "qwen3_embedding"


def embedding_reference() -> dict:
    """transformers' vectors for the embedding fixture's texts."""
    import json

    return json.loads((embedding_model() / "embeddings.json").read_text())


def script() -> dict:
    """The scripted model's conversations and replies."""
    import json

    return json.loads((scripted_model() / "script.json").read_text())


def scripted_parts(name: str) -> tuple[str, str]:
    """The reasoning and the answer of the scripted reply `name`."""
    reply = script()[name]["reply"]
    if "</think>" not in reply:
        return "", reply
    reasoning, answer = reply.split("</think>", 1)
    return reasoning.removeprefix("<think>"), answer.lstrip()


def vision_model() -> Path:
    """The tiny Gemma 3 that reads pictures (`generate_tiny_vision.py`); served as `gemma3_vision`."""
    return Path(__file__).resolve().parent.parent / "fixtures" / "tiny" / "gemma3_vision"


def vision_case(cake: str) -> dict:
    """The fixture's picture and question, with what `cake run --chat --image` makes of them (greedy, 8
    tokens): its `prompt_tokens` (as many as Gemma3Processor's ids) and its `text`."""
    folder = vision_model()
    chat = json.loads((folder / "reference.json").read_text())["chat"]
    picture = folder / chat["picture"]
    run = subprocess.run([cake, "run", "--model", str(folder), "--chat", "--image", str(picture), "--prompt",
                          chat["question"], "--temperature", "0", "--max-tokens", "8", "--json"],
                         check=True, capture_output=True, text=True)
    out = json.loads(run.stdout)
    assert out["prompt_tokens"] == chat["ids"], out["prompt_tokens"]
    return {"picture": picture, "question": chat["question"], "prompt_tokens": len(chat["ids"]), "text": out["text"]}
