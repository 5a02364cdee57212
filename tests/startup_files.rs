//! What Cake writes to start with the user's session: the systemd user unit
//! of `cake worker --install-service` must pass `systemd-analyze verify`,
//! keep the cluster key out of the unit in a file only the user can read,
//! and go away with `--uninstall-service`.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

const KEY: &str = "a cluster key long enough for a worker service";

fn cake(config_home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cake"))
        .args(args)
        .env("XDG_CONFIG_HOME", config_home)
        .env("CAKE_CLUSTER_KEY", KEY)
        // No user session here: `systemctl --user` must fail cleanly, not hang.
        .env_remove("DBUS_SESSION_BUS_ADDRESS")
        .env_remove("XDG_RUNTIME_DIR")
        .output()
        .expect("run cake")
}

#[test]
fn the_worker_service_unit_passes_systemd_analyze_and_uninstalls() {
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("config");
    let installed = cake(&config, &["worker", "--name", "spare \"den\" pc", "--port", "10199", "--install-service"]);
    let stderr = String::from_utf8_lossy(&installed.stderr);
    assert!(installed.status.success(), "{stderr}");
    assert!(stderr.contains("systemctl --user enable --now cake-worker.service"), "says how to start it: {stderr}");

    let unit = config.join("systemd/user/cake-worker.service");
    let text = std::fs::read_to_string(&unit).unwrap();
    assert!(!text.contains(KEY), "the key stays out of the unit:\n{text}");
    assert!(text.contains(r#" worker --name "spare \"den\" pc" --host 0.0.0.0 --port 10199"#), "{text}");
    let key_file = config.join("cake/worker.env");
    assert_eq!(std::fs::metadata(&key_file).unwrap().permissions().mode() & 0o777, 0o600);
    assert!(std::fs::read_to_string(&key_file).unwrap().contains(KEY));

    let runtime = home.path().join("run");
    std::fs::create_dir(&runtime).unwrap();
    std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700)).unwrap();
    let verify = Command::new("systemd-analyze")
        .args(["verify", "--user"])
        .arg(&unit)
        .env("XDG_CONFIG_HOME", &config)
        .env("XDG_RUNTIME_DIR", &runtime)
        .output()
        .expect("systemd-analyze (Debian's systemd package) is needed");
    assert!(
        verify.status.success() && verify.stderr.is_empty(),
        "systemd-analyze verify: {}",
        String::from_utf8_lossy(&verify.stderr)
    );

    let removed = cake(&config, &["worker", "--uninstall-service"]);
    assert!(removed.status.success(), "{}", String::from_utf8_lossy(&removed.stderr));
    assert!(!unit.exists() && !key_file.exists(), "both files are removed");
    let again = cake(&config, &["worker", "--uninstall-service"]);
    assert!(String::from_utf8_lossy(&again.stdout).contains("no worker service was installed"));
}
