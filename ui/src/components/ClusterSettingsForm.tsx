// The cluster settings: key, worker mode, machine name and port, mDNS
// interfaces, discovery time and workers added by address. Fields the user has not touched follow the
// polled settings; Save sends only the fields that changed.

import { useState } from "preact/hooks";
import type { ClusterSettings, ClusterStatus, GpuMode } from "../api/types";
import { describeGpuChoice } from "../lib/gpu";
import {
  MAX_CONTEXT_TOKENS,
  MAX_DISCOVERY_SECONDS,
  MIN_CONTEXT_TOKENS,
  formFromSettings,
  isEmptyUpdate,
  keyDescription,
  settingsChanges,
  type ClusterForm,
} from "../lib/cluster";
import { copyText } from "../lib/clipboard";
import { desktopSession } from "../transport";
import { ConfirmDialog } from "./ConfirmDialog";
import { StartAtLogin } from "./StartAtLogin";
import { useCake } from "./context";

interface Props {
  settings: ClusterSettings;
  /** What each GPU setting finds on this machine. */
  gpus: ClusterStatus["gpus"];
  saving: boolean;
}

export function ClusterSettingsForm({ settings, gpus, saving }: Props) {
  const cake = useCake();
  const [edits, setEdits] = useState<Partial<ClusterForm>>({});
  const [forgetting, setForgetting] = useState(false);
  // A generated key is shown in clear so it can be copied to the other machines.
  const [generated, setGenerated] = useState<string | null>(null);

  const form: ClusterForm = { ...formFromSettings(settings), ...edits };
  const { update, problem } = settingsChanges(settings, form);
  const unchanged = isEmptyUpdate(update) && problem === null;
  const keyState = keyDescription(settings);
  const showingGenerated = generated !== null && form.key === generated;
  const edit = (change: Partial<ClusterForm>) => setEdits((current) => ({ ...current, ...change }));

  const submit = async () => {
    if (problem !== null) {
      cake.notices.report(new Error(problem));
      return;
    }
    if (await cake.cluster.save(update)) {
      setEdits({});
      setGenerated(null);
    }
  };

  const generate = async () => {
    const key = await cake.cluster.generateKey();
    if (key === null) return;
    setGenerated(key);
    edit({ key });
  };

  return (
    <form
      class="cluster-settings"
      data-testid="cluster-settings"
      aria-labelledby="cluster-settings-title"
      noValidate // settingsChanges checks the numbers and says what is wrong
      onSubmit={(event) => {
        event.preventDefault();
        void submit();
      }}
    >
      <h2 id="cluster-settings-title" class="section-title">
        Settings
      </h2>
      {settings.from_command_line ? (
        <p class="cluster-note" data-testid="cluster-command-line">
          Cluster flags from the command line (<code>--cluster-key</code>, <code>--worker</code>,{" "}
          <code>--topology</code>) are in effect until you save these settings.
        </p>
      ) : null}

      <div class="field">
        <label class="field-label" for="cluster-key-input">
          Cluster key
        </label>
        <div class="cluster-key-row">
          <input
            id="cluster-key-input"
            type={showingGenerated ? "text" : "password"}
            data-testid="cluster-key"
            value={form.key}
            autocomplete="new-password"
            spellcheck={false}
            placeholder={settings.key_set ? "Keep the stored key" : "Paste a key"}
            onInput={(event) => edit({ key: event.currentTarget.value })}
          />
          <button type="button" data-testid="cluster-generate-key" onClick={() => void generate()}>
            Generate key
          </button>
        </div>
        {showingGenerated ? (
          <div class="cluster-generated-key">
            <code data-testid="cluster-generated-key">{generated}</code>
            <button
              type="button"
              class="small"
              data-testid="cluster-copy-key"
              onClick={() =>
                copyText(generated).then(
                  () => cake.notices.inform("Cluster key copied"),
                  (error) => cake.notices.report(error),
                )
              }
            >
              Copy
            </button>
          </div>
        ) : null}
        <span class="field-hint" data-testid="cluster-key-hint">
          {showingGenerated
            ? "Copy this key to your other machines now, then Save: it is not shown again."
            : settings.key_set
              ? "Leave empty to keep the stored key; paste or generate a new one to replace it."
              : "Use the same key on every machine of the cluster. It is never shown again."}
        </span>
      </div>
      {settings.key_warning ? (
        <p class="cluster-key-warning small" role="alert" data-testid="cluster-key-warning">
          {settings.key_warning}
        </p>
      ) : null}
      {keyState ? (
        <div class="cluster-key-state">
          <span class="small" data-testid="cluster-key-state">
            {keyState}
          </span>
          <button
            type="button"
            class="danger-outline small"
            data-testid="cluster-forget-key"
            disabled={saving}
            onClick={() => setForgetting(true)}
          >
            Forget key
          </button>
        </div>
      ) : null}

      <label class="field-check cluster-check">
        <input
          type="checkbox"
          data-testid="cluster-join-worker"
          checked={form.join_as_worker}
          onChange={(event) => edit({ join_as_worker: event.currentTarget.checked })}
        />
        <span>
          <span class="cluster-check-label">Join as worker</span>
          <span class="field-hint"> serve layers of other machines' models instead of using workers</span>
        </span>
      </label>
      {desktopSession ? <StartAtLogin session={desktopSession} /> : null}

      <div class="cluster-fields">
        <label class="field">
          <span class="field-label">Machine name</span>
          <input
            type="text"
            data-testid="cluster-worker-name"
            value={form.worker_name}
            maxLength={64}
            spellcheck={false}
            autocomplete="off"
            onInput={(event) => edit({ worker_name: event.currentTarget.value })}
          />
          <span class="field-hint">shown to masters</span>
        </label>
        <label class="field">
          <span class="field-label">Port</span>
          <input
            type="number"
            data-testid="cluster-worker-port"
            value={form.worker_port}
            min={0}
            max={65535}
            step={1}
            onInput={(event) => edit({ worker_port: event.currentTarget.value })}
          />
          <span class="field-hint">where the worker listens; 0 = any free port</span>
        </label>
      </div>

      <label class="field">
        <span class="field-label">mDNS interfaces</span>
        <input
          type="text"
          data-testid="cluster-mdns"
          value={form.mdns_interfaces}
          placeholder="all interfaces"
          spellcheck={false}
          autocomplete="off"
          onInput={(event) => edit({ mdns_interfaces: event.currentTarget.value })}
        />
        <span class="field-hint">
          Network interfaces to find machines on, comma-separated (e.g. <code>eth0, wlan0</code>). Empty = all
          interfaces; <code>lo</code> = this machine only.
        </span>
      </label>

      <label class="field">
        <span class="field-label">Discovery time (seconds)</span>
        <input
          type="number"
          data-testid="cluster-discovery-timeout"
          value={form.discovery_timeout_s}
          min={0}
          max={MAX_DISCOVERY_SECONDS}
          step="any"
          onInput={(event) => edit({ discovery_timeout_s: event.currentTarget.value })}
        />
        <span class="field-hint">how long to listen for workers, 0 to {MAX_DISCOVERY_SECONDS}</span>
      </label>

      <label class="field">
        <span class="field-label">Context length (tokens)</span>
        <input
          type="number"
          data-testid="cluster-context-length"
          value={form.context_length}
          min={MIN_CONTEXT_TOKENS}
          max={MAX_CONTEXT_TOKENS}
          step={1}
          placeholder="the model's own, up to 8192"
          onInput={(event) => edit({ context_length: event.currentTarget.value })}
        />
        <span class="field-hint">
          what a conversation may hold; KV caches and cluster plans are sized for it (the model reloads)
        </span>
      </label>

      <label class="field">
        <span class="field-label">Graphics card (GPU)</span>
        <select
          data-testid="cluster-gpu"
          value={form.gpu}
          onChange={(event) => edit({ gpu: event.currentTarget.value as GpuMode })}
        >
          <option value="off">Off: the CPU only</option>
          <option value="auto">Auto: a hardware GPU if there is one</option>
          <option value="on">On: any GPU driver, software ones too</option>
        </select>
        <span class="field-hint" data-testid="cluster-gpu-hint">
          {describeGpuChoice(form.gpu, gpus)} This machine's layers run there, as a worker too (the model reloads).
        </span>
      </label>

      <label class="field">
        <span class="field-label">Workers by address</span>
        <textarea
          data-testid="cluster-worker-addresses"
          value={form.worker_addresses}
          rows={2}
          placeholder="192.168.1.20:10128"
          spellcheck={false}
          autocomplete="off"
          onInput={(event) => edit({ worker_addresses: event.currentTarget.value })}
        />
        <span class="field-hint">
          Machines mDNS cannot find (another subnet, a VPN), one <code>host:port</code> per line: tried beside the ones
          found, and listed below with whether they answer.
        </span>
      </label>

      <div class="cluster-save">
        <button type="submit" class="primary" data-testid="cluster-save" disabled={saving || unchanged}>
          {saving ? "Saving…" : "Save"}
        </button>
        {!unchanged && !saving ? <span class="muted small">Unsaved changes</span> : null}
      </div>

      {forgetting ? (
        <ConfirmDialog
          title="Forget the cluster key?"
          message="This machine leaves the cluster: it stops serving as a worker and stops using workers. To rejoin, type the key again."
          confirmLabel="Forget key"
          onCancel={() => setForgetting(false)}
          onConfirm={() => {
            setForgetting(false);
            void cake.cluster.forgetKey();
          }}
        />
      ) : null}
    </form>
  );
}
