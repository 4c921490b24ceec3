#![allow(clippy::unwrap_used)]

use std::collections::HashMap;

use super::*;

fn load_with(file: Option<&str>, vars: &[(&str, &str)]) -> Result<Hosts, String> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.toml");
    let mut env: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    env.insert("HOME".into(), "/nonexistent".into());
    if let Some(text) = file {
        std::fs::write(&path, text).unwrap();
        env.insert("CUBA_EXEC_CONFIG".into(), path.display().to_string());
    }
    load(&|k| env.get(k).cloned())
}

#[test]
fn ssh_and_command_hosts_come_from_the_file_beside_the_daemon_keys() {
    let hosts = load_with(
        Some(
            "max_procs = 3\n[limits]\nopen_files = 9\n\n[hosts.build]\nssh = \"me@build\"\n\
             remote_bin = \"~/bin/cubactl\"\ncwd = \"/srv/app\"\n\n[hosts.dev]\n\
             command = [\"docker\", \"exec\", \"-i\", \"dev\", \"cubactl\", \"bridge\"]\n",
        ),
        &[],
    )
    .unwrap();
    let build = hosts.get("build").unwrap();
    assert_eq!(build.cwd.as_deref(), Some("/srv/app"));
    let argv = build.argv();
    assert_eq!(argv[0], "ssh");
    assert!(argv.contains(&"BatchMode=yes".to_string()), "{argv:?}");
    assert_eq!(
        argv[argv.len() - 3..],
        ["me@build", "~/bin/cubactl", "bridge"]
    );
    assert_eq!(
        hosts.get("dev").unwrap().argv()[..3],
        ["docker", "exec", "-i"]
    );
}

#[test]
fn a_typo_in_a_host_names_its_line() {
    let err = load_with(Some("max_procs = 3\n\n[hosts.build]\nsssh = \"b\"\n"), &[]).unwrap_err();
    assert!(err.contains("line 4") && err.contains("sssh"), "{err}");
}

#[test]
fn a_host_needs_exactly_one_bridge_and_a_good_name() {
    let both = load_with(Some("[hosts.b]\nssh = \"b\"\ncommand = [\"x\"]\n"), &[]).unwrap_err();
    assert!(both.contains("both"), "{both}");
    let none = load_with(Some("[hosts.b]\ncwd = \"/x\"\n"), &[]).unwrap_err();
    assert!(none.contains("needs"), "{none}");
    let local = load_with(Some("[hosts.local]\nssh = \"b\"\n"), &[]).unwrap_err();
    assert!(local.contains("this machine"), "{local}");
    let cwd = load_with(Some("[hosts.b]\nssh = \"b\"\ncwd = \"rel\"\n"), &[]).unwrap_err();
    assert!(cwd.contains("absolute"), "{cwd}");
    let opt = load_with(Some("[hosts.b]\nssh = \"-oProxyCommand=x\"\n"), &[]).unwrap_err();
    assert!(opt.contains("not an ssh destination"), "{opt}");
}

#[test]
fn the_environment_adds_hosts_and_wins() {
    let hosts = load_with(
        Some("[hosts.build]\nssh = \"old\"\n"),
        &[(
            "CUBA_EXEC_HOSTS",
            "build=ssh:me@build, gpu=ssh:gpu1,box=command:sh -c bridge",
        )],
    )
    .unwrap();
    assert_eq!(hosts.get("build").unwrap().via(), "ssh me@build");
    assert_eq!(hosts.get("gpu").unwrap().via(), "ssh gpu1");
    assert_eq!(hosts.get("box").unwrap().argv(), ["sh", "-c", "bridge"]);
    let bad = load_with(None, &[("CUBA_EXEC_HOSTS", "build")]).unwrap_err();
    assert!(bad.contains("NAME=ssh:DEST"), "{bad}");
}

#[test]
fn unknown_and_disallowed_hosts_say_what_to_do() {
    let hosts = load_with(
        None,
        &[
            ("CUBA_EXEC_HOSTS", "a=ssh:a,b=ssh:b"),
            ("CUBA_EXEC_ALLOWED_HOSTS", "a"),
        ],
    )
    .unwrap();
    assert!(hosts.get("a").is_ok());
    let denied = hosts.get("b").unwrap_err();
    assert!(denied.contains("not allowed by policy"), "{denied}");
    let unknown = hosts.get("c").unwrap_err();
    assert!(
        unknown.contains("unknown host") && unknown.contains("a, b"),
        "{unknown}"
    );
    assert!(hosts.allowed(LOCAL));
}
