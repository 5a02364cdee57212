//! The cluster from the app's side, through its HTTP API (the commands the
//! desktop window and the browser UI call): one app joins as a worker from
//! its settings, another finds it over mDNS as a master, rejects a worker
//! of another cluster, spreads a model over both and reports who holds
//! which layers. Settings and the key survive a restart; the key never
//! leaves the key store. Runs in a network namespace of its own as root
//! (mDNS restricted to loopback otherwise).

mod common;

use common::place::Place;
use common::server::Server;
use serde_json::{json, Value};
use std::process::{Child, Stdio};

fn call(server: &Server, command: &str, args: Value) -> Value {
    let (status, body) = server.post(&format!("/app/{command}"), &args);
    assert_eq!(status, 200, "{command}: {body}");
    body
}

fn call_error(server: &Server, command: &str, args: Value) -> String {
    let (status, body) = server.post(&format!("/app/{command}"), &args);
    assert_eq!(status, 400, "{command} should fail: {body}");
    body["error"]["message"].as_str().unwrap().to_string()
}

/// A `cake worker` of another cluster, advertised on loopback mDNS.
struct Stranger(Child);

impl Drop for Stranger {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn an_app_joins_as_worker_and_another_spreads_a_model_over_it() {
    let place = Place::new("app");
    let root = tempfile::tempdir().unwrap();
    let (worker_data, hf) = (root.path().join("worker"), root.path().join("hf"));
    let master_data = common::server::data_dir_with_default_model(&root.path().join("master"));
    let start = |data: &std::path::Path| {
        Server::start_command(place.command(env!("CARGO_BIN_EXE_cake")), data, &hf, &[], &[("CAKE_KEYRING", "off")])
    };
    let worker_app = start(&worker_data);
    let master_app = start(&master_data);
    let _stranger = Stranger(
        place
            .command(env!("CARGO_BIN_EXE_cake"))
            .args(["worker", "--generate-key", "--name", "stranger", "--port", "0", "--mdns-iface", "lo"])
            .env("CAKE_DATA_DIR", root.path().join("stranger"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );

    let key = place.run(|| {
        // Without a key there is no cluster, and a worker needs one.
        assert_eq!(call(&worker_app, "cluster_status", json!({}))["role"], "off");
        let message = call_error(&worker_app, "set_cluster_settings", json!({"join_as_worker": true}));
        assert!(message.contains("cluster key"), "{message}");

        // A typed key works but is called weak; a generated one is not.
        let status = call(&worker_app, "set_cluster_settings", json!({"key": "app cluster key"}));
        assert!(status["settings"]["key_warning"].as_str().unwrap().contains("Generate key"), "{status}");
        assert_eq!(status["settings"]["cluster_id"], Value::Null, "{status}");
        let key = call(&worker_app, "generate_cluster_key", json!({}))["key"].as_str().unwrap().to_string();
        assert_ne!(call(&worker_app, "generate_cluster_key", json!({}))["key"], key.as_str());
        let status = call(
            &worker_app,
            "set_cluster_settings",
            json!({"key": key, "join_as_worker": true, "worker_name": "app-worker", "worker_port": 0, "mdns_interfaces": ["lo"]}),
        );
        assert_eq!(status["role"], "worker", "{status}");
        assert!(status["worker"]["address"].as_str().is_some(), "{status}");

        let status = call(
            &master_app,
            "set_cluster_settings",
            json!({"key": key, "mdns_interfaces": ["lo"], "discovery_timeout_s": 3, "worker_name": "app-master"}),
        );
        assert_eq!(status["role"], "master", "{status}");
        assert_eq!(status["settings"]["cluster_id"], key[6..14], "{status}");
        assert_eq!(status["settings"]["key_warning"], Value::Null, "{status}");

        let status = call(&master_app, "scan_cluster", json!({}));
        let machines = status["machines"].as_array().unwrap();
        let find = |name: &str| machines.iter().find(|m| m["name"] == name).unwrap_or_else(|| panic!("{name} not seen: {status}"));
        assert_eq!(machines[0]["state"], "this_machine", "{status}");
        assert_eq!(machines[0]["name"], "app-master", "this machine goes by its machine name: {status}");
        assert_eq!(find("app-worker")["state"], "authenticated", "{status}");
        assert!(find("app-worker")["info"]["memory_bytes"].as_u64().unwrap() > 0);
        assert_eq!(find("stranger")["state"], "rejected", "{status}");
        assert!(find("stranger")["problem"].as_str().unwrap().contains("different cluster key"));
        key
    });
    drop(master_app);

    // Settings and key survive a restart; the key is only in the private key file.
    let master_app = start(&master_data);
    let key_file = master_data.join("cluster-key");
    let settings_text = std::fs::read_to_string(master_data.join("cluster.json")).unwrap();
    assert!(!settings_text.contains(&key), "the key must not be in cluster.json");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&key_file).unwrap().permissions().mode() & 0o777, 0o600);

    place.run(|| {
        let status = call(&master_app, "cluster_status", json!({}));
        assert_eq!(status["role"], "master", "{status}");
        assert_eq!(status["settings"]["cluster_id"], key[6..14]);
        assert_eq!(status["settings"]["key_storage"], "file");
        assert_eq!(status["settings"]["mdns_interfaces"], json!(["lo"]));
        assert!(!status.to_string().contains(&key), "the key is never sent back");

        // Loading a model spreads it over both machines (the default model: with
        // 30 layers the planner splits them whatever the machines' measured speeds).
        let entry = json!({"id": "default"});
        let (status_code, events) = master_app.stream("/app/load_model", &json!({"id": entry["id"]}), |_, _| true);
        assert_eq!(status_code, 200);
        assert!(events.last().unwrap().contains("\"done\""), "{events:?}");
        assert!(
            events.iter().any(|e| e.contains("sending app-worker the weights of layers")),
            "weight transfer progress is reported: {events:?}"
        );
        let status = call(&master_app, "cluster_status", json!({}));
        let run = &status["run"];
        assert_eq!(run["ready"], true, "{status}");
        let stages = run["stages"].as_array().unwrap();
        let total = run["total_layers"].as_u64().unwrap();
        let covered: u64 = stages.iter().map(|s| s["layers"][1].as_u64().unwrap() - s["layers"][0].as_u64().unwrap()).sum();
        assert_eq!(covered, total, "every layer is somewhere: {status}");
        let on_worker = stages.iter().find(|s| s["node"] == "app-worker").expect("the worker has a stage");
        assert!(on_worker["layers"][1].as_u64() > on_worker["layers"][0].as_u64(), "the worker holds layers: {status}");
        assert!(on_worker["reason"].as_str().unwrap().contains("layers"), "{status}");
        assert!(on_worker["weights_to_send"].as_u64().unwrap() > 0, "weights were streamed: {status}");
        // Both apps run on this machine's kernel: their steps go one after the other.
        assert_eq!(run["decode_steps"]["pipelined"], false, "{status}");
        assert!(run["decode_steps"]["why"].as_str().unwrap().contains("share a kernel"), "{status}");

        // A reply runs through the worker, which reports the master's session.
        let (code, events) = master_app.stream(
            "/app/chat",
            &json!({"model_id": entry["id"], "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, "sampling": {"temperature": 0}}),
            |_, _| true,
        );
        assert_eq!(code, 200);
        assert!(events.last().unwrap().contains("\"done\""), "{events:?}");
        let status = call(&master_app, "cluster_status", json!({}));
        let on_worker = status["run"]["stages"].as_array().unwrap().iter().find(|s| s["node"] == "app-worker").unwrap().clone();
        assert!(on_worker["bytes_sent"].as_u64().unwrap() > 0 && on_worker["compute_share"].as_f64().unwrap() > 0.0, "{status}");
        let worker_status = call(&worker_app, "cluster_status", json!({}));
        let masters = worker_status["worker"]["masters"].as_array().unwrap();
        let serving = masters.iter().find(|m| !m["layers"].is_null()).unwrap_or_else(|| panic!("{worker_status}"));
        assert!(serving["forwards"].as_u64().unwrap() > 0, "{worker_status}");

        // Leaving worker mode stops serving.
        let status = call(&worker_app, "set_cluster_settings", json!({"join_as_worker": false}));
        assert_eq!(status["role"], "master", "{status}");
        assert!(status["worker"].is_null());
    });
}

/// A worker mDNS cannot see (it does not advertise) is added by address in
/// the app's settings: remembered across restarts, shown with whether it
/// answers beside an address that does not, and given layers like a
/// discovered one. Addresses that are not `host:port` are refused.
#[test]
fn a_worker_added_by_address_is_remembered_and_joins_the_plan() {
    let place = Place::new("by-address");
    let root = tempfile::tempdir().unwrap();
    let hf = root.path().join("hf");
    let master_data = common::server::data_dir_with_default_model(&root.path().join("master"));
    let start = || {
        Server::start_command(
            place.command(env!("CARGO_BIN_EXE_cake")),
            &master_data,
            &hf,
            &[],
            &[("CAKE_KEYRING", "off")],
        )
    };
    let key = "added by address cluster key";
    let mut hidden = place
        .command(env!("CARGO_BIN_EXE_cake"))
        .args(["worker", "--name", "hidden", "--host", "127.0.0.1", "--port", "0", "--no-mdns"])
        .env("CAKE_DATA_DIR", root.path().join("hidden"))
        .env("CAKE_CLUSTER_KEY", key)
        .env("RAYON_NUM_THREADS", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let hidden_address = common::ready_address(hidden.stdout.take().unwrap());
    let _hidden = Stranger(hidden);
    // Nothing listens on port 9 (discard) here.
    let silent = "127.0.0.1:9".to_string();

    let master_app = start();
    place.run(|| {
        let message = call_error(&master_app, "set_cluster_settings", json!({"worker_addresses": ["kitchen"]}));
        assert!(message.contains("`kitchen` is not a worker address") && message.contains("host:port"), "{message}");
        let status = call(
            &master_app,
            "set_cluster_settings",
            json!({"key": key, "mdns_interfaces": ["lo"], "discovery_timeout_s": 1,
                   "worker_addresses": [format!(" {hidden_address} "), silent, hidden_address]}),
        );
        assert_eq!(status["settings"]["worker_addresses"], json!([hidden_address, silent]), "{status}");
    });
    drop(master_app);

    let master_app = start();
    place.run(|| {
        let status = call(&master_app, "cluster_status", json!({}));
        assert_eq!(status["settings"]["worker_addresses"], json!([hidden_address, silent]), "remembered: {status}");
        let status = call(&master_app, "scan_cluster", json!({}));
        let machines = status["machines"].as_array().unwrap();
        let at = |address: &str| {
            machines
                .iter()
                .find(|m| m["address"] == address)
                .unwrap_or_else(|| panic!("{address} not listed: {status}"))
        };
        assert_eq!(at(&hidden_address)["state"], "authenticated", "{status}");
        assert_eq!(at(&hidden_address)["name"], "hidden", "{status}");
        assert_eq!(at(&silent)["state"], "unreachable", "{status}");
        assert!(at(&silent)["problem"].as_str().is_some_and(|p| !p.is_empty()), "{status}");

        // The placement preview, before loading: this machine alone and
        // both machines, each predicted; one picked, with its reason.
        let preview = call(&master_app, "preview_cluster", json!({"model_id": "default"}));
        let labels: Vec<&str> =
            preview["options"].as_array().unwrap().iter().map(|o| o["label"].as_str().unwrap()).collect();
        assert_eq!(labels, ["this machine alone", "all 2 machines"], "{preview}");
        for option in preview["options"].as_array().unwrap() {
            assert!(option["prediction"]["decode_tokens_per_second"].as_f64().unwrap() > 1.0, "{preview}");
        }
        assert!(
            preview["chosen"].as_u64().is_some() && preview["reason"].as_str().unwrap().contains("tok/s"),
            "{preview}"
        );
        let (code, body) = master_app.post("/app/preview_cluster", &json!({"model_id": "no-such-model"}));
        assert_eq!(code, 404, "{body}");

        // Loading spreads the model over this machine and the added worker;
        // the silent address is left out rather than failing the load.
        let (code, events) = master_app.stream("/app/load_model", &json!({"id": "default"}), |_, _| true);
        assert_eq!(code, 200);
        assert!(events.last().unwrap().contains("\"done\""), "{events:?}");
        let status = call(&master_app, "cluster_status", json!({}));
        let stages = status["run"]["stages"].as_array().unwrap();
        let hidden_stage = stages.iter().find(|s| s["node"] == "hidden").unwrap_or_else(|| panic!("{status}"));
        assert_eq!(hidden_stage["address"], hidden_address.as_str());
        assert!(hidden_stage["layers"][1].as_u64() > hidden_stage["layers"][0].as_u64(), "it holds layers: {status}");
    });
}

/// The fastest of three loads of `id` (each after an unload), in seconds.
fn fastest_load(server: &Server, id: &str) -> f64 {
    (0..3)
        .map(|_| {
            call(server, "unload_model", json!({}));
            let started = std::time::Instant::now();
            let (status, events) = server.stream("/app/load_model", &json!({"id": id}), |_, _| true);
            assert_eq!(status, 200);
            assert!(events.last().unwrap().contains("\"done\""), "{events:?}");
            started.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

/// A key saved on a machine with no workers around costs a load no time:
/// the workers are watched for in the background, and a load waits for
/// no one (it once browsed for the whole discovery time, 2 s and more).
#[test]
fn a_saved_key_with_no_workers_costs_a_load_no_time() {
    let place = Place::new("lonely");
    let root = tempfile::tempdir().unwrap();
    let data = common::server::data_dir_with_default_model(&root.path().join("data"));
    let app = Server::start_command(
        place.command(env!("CARGO_BIN_EXE_cake")),
        &data,
        &root.path().join("hf"),
        &[],
        &[("CAKE_KEYRING", "off")],
    );
    place.run(|| {
        let without_key = fastest_load(&app, "default");
        let status = call(
            &app,
            "set_cluster_settings",
            json!({"key": "a key for no one", "mdns_interfaces": ["lo"], "discovery_timeout_s": 2}),
        );
        assert_eq!(status["role"], "master", "{status}");
        // The first discovery window after the key was saved passes.
        std::thread::sleep(std::time::Duration::from_millis(2200));
        let with_key = fastest_load(&app, "default");
        assert!(
            with_key - without_key < 0.3,
            "a load took {with_key:.2} s with a key and no workers, {without_key:.2} s without a key"
        );
        let status = call(&app, "cluster_status", json!({}));
        assert_eq!(status["run"]["ready"], true, "the model runs on this machine alone: {status}");
    });
}
