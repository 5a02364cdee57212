// Desktop only: serve the OpenAI-compatible API to other programs on this
// computer (on 127.0.0.1, always with an API key Cake makes). Shows where
// to point a client, and the key, hidden until asked for.

import { useEffect, useState } from "preact/hooks";
import type { OpenAiApiStatus } from "../api/types";
import type { DesktopSession } from "../transport";
import { useCake } from "./context";
import { CopyButton } from "./CopyButton";

export function OpenAiApiSwitch({ session }: { session: DesktopSession }) {
  const cake = useCake();
  const [status, setStatus] = useState<OpenAiApiStatus | null>(null);
  const [port, setPort] = useState("");
  const [changing, setChanging] = useState(false);
  const [keyShown, setKeyShown] = useState(false);

  useEffect(() => {
    session.openAiApi().then(
      (found) => {
        setStatus(found);
        setPort((typed) => (typed === "" ? String(found.port) : typed));
      },
      (error: unknown) => cake.notices.report(error),
    );
  }, [session]);

  const change = async (enabled: boolean) => {
    const wanted = Number(port);
    if (!Number.isInteger(wanted) || wanted < 1 || wanted > 65535) {
      cake.notices.report(new Error("The port is a whole number from 1 to 65535."));
      return;
    }
    setChanging(true);
    try {
      setStatus(await session.setOpenAiApi(enabled, wanted));
    } catch {
      // The status says why (a port in use): shown below the switch.
      setStatus(await session.openAiApi().catch(() => status));
    } finally {
      setChanging(false);
    }
  };

  const serving = status?.base_url != null;
  return (
    <div class="openai-api" data-testid="openai-api">
      <label class="field-check">
        <input
          type="checkbox"
          data-testid="openai-api-switch"
          checked={status?.enabled === true}
          disabled={status === null || changing}
          onChange={(event) => void change(event.currentTarget.checked)}
        />
        <span>
          Serve the OpenAI API to other programs on this computer
          <span class="field-hint"> while Cake runs, with the key below</span>
        </span>
      </label>
      <label class="field openai-api-port">
        <span class="field-label">Port</span>
        <input
          type="number"
          min={1}
          max={65535}
          data-testid="openai-api-port"
          value={port}
          disabled={status === null || changing || serving}
          onInput={(event) => setPort(event.currentTarget.value)}
        />
      </label>
      {status?.error ? (
        <p class="openai-api-error" role="alert" data-testid="openai-api-error">
          Not serving: {status.error}
        </p>
      ) : null}
      {serving && status?.api_key ? (
        <dl class="openai-api-access">
          <dt>Base URL</dt>
          <dd>
            <code data-testid="openai-api-url">{status.base_url}</code>
            <CopyButton text={status.base_url!} />
          </dd>
          <dt>API key</dt>
          <dd>
            <code data-testid="openai-api-key">{keyShown ? status.api_key : "•".repeat(16)}</code>
            <button
              type="button"
              class="ghost small"
              data-testid="openai-api-show-key"
              onClick={() => setKeyShown(!keyShown)}
            >
              {keyShown ? "Hide" : "Show"}
            </button>
            <CopyButton text={status.api_key} />
          </dd>
        </dl>
      ) : null}
    </div>
  );
}
