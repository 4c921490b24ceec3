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
    let argv = build.argv(None);
    assert_eq!(argv[0], "ssh");
    assert!(argv.contains(&"BatchMode=yes".to_string()), "{argv:?}");
    assert_eq!(
        argv[argv.len() - 3..],
        ["me@build", "~/bin/cubactl", "bridge"]
    );
    assert_eq!(
        hosts.get("dev").unwrap().argv(None)[..3],
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
    assert!(both.contains("`ssh` and `command`; give one"), "{both}");
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
    assert_eq!(hosts.get("box").unwrap().argv(None), ["sh", "-c", "bridge"]);
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

#[test]
fn container_and_pod_hosts_bridge_through_their_engines() {
    let hosts = load_with(
        Some(
            "host_parallel = 3\n[hosts.dev]\ncontainer = \"devbox\"\nengine = \"docker\"\n\
             user = \"me\"\n\n[hosts.fresh]\nimage = \"debian:12\"\nengine = \"podman\"\n\
             run_options = [\"--network=none\"]\n\n[hosts.web]\npod = \"web-0\"\n\
             namespace = \"dev\"\ncontext = \"kind\"\npod_container = \"app\"\n\
             remote_bin = \"/usr/local/bin/cubactl\"\n",
        ),
        &[],
    )
    .unwrap();
    assert_eq!(hosts.parallel(), 3);
    let dev = hosts.get("dev").unwrap();
    assert_eq!(
        dev.argv(Some("/opt/cuba-exec/bin/cubactl")),
        [
            "docker",
            "exec",
            "-i",
            "-u",
            "me",
            "devbox",
            "/opt/cuba-exec/bin/cubactl",
            "bridge"
        ]
    );
    assert_eq!(dev.keepalive, None);
    let fresh = hosts.get("fresh").unwrap();
    // Made from its image under a name of the host's.
    assert_eq!(
        fresh.argv(None),
        [
            "podman",
            "exec",
            "-i",
            "cuba-exec-fresh",
            "cubactl",
            "bridge"
        ]
    );
    assert_eq!(
        fresh.via(),
        "podman container cuba-exec-fresh (image debian:12)"
    );
    let web = hosts.get("web").unwrap();
    assert_eq!(
        web.argv(None),
        [
            "kubectl",
            "--context",
            "kind",
            "-n",
            "dev",
            "exec",
            "-i",
            "web-0",
            "-c",
            "app",
            "--",
            "/usr/local/bin/cubactl",
            "bridge"
        ]
    );
    assert_eq!(web.keepalive, Some(super::POD_KEEPALIVE));
    assert_eq!(web.via(), "kubectl pod dev/web-0");
}

#[test]
fn container_and_pod_keys_are_checked() {
    let both = load_with(Some("[hosts.b]\ncontainer = \"x\"\npod = \"y\"\n"), &[]).unwrap_err();
    assert!(both.contains("`container` and `pod`"), "{both}");
    let stray = load_with(Some("[hosts.b]\nssh = \"b\"\nnamespace = \"x\"\n"), &[]).unwrap_err();
    assert!(
        stray.contains("namespace do not apply to a `ssh` host"),
        "{stray}"
    );
    let run = load_with(
        Some("[hosts.b]\ncontainer = \"x\"\nrun_options = [\"-v\"]\n"),
        &[],
    )
    .unwrap_err();
    assert!(run.contains("made from `image`"), "{run}");
    let opt = load_with(Some("[hosts.b]\ncontainer = \"--privileged\"\n"), &[]).unwrap_err();
    assert!(opt.contains("not a name"), "{opt}");
    let zero = load_with(Some("host_parallel = 0\n"), &[]).unwrap_err();
    assert!(zero.contains("host_parallel"), "{zero}");
    let env = load_with(None, &[("CUBA_EXEC_HOST_PARALLEL", "many")]).unwrap_err();
    assert!(env.contains("CUBA_EXEC_HOST_PARALLEL"), "{env}");
}

#[test]
fn the_environment_names_containers_images_and_pods() {
    let hosts = load_with(
        None,
        &[(
            "CUBA_EXEC_HOSTS",
            "a=podman:dev,b=docker:ci,c=image:debian:12,d=pod:ns/web-0,e=pod:solo",
        )],
    )
    .unwrap();
    assert_eq!(
        hosts.get("a").unwrap().argv(None)[..4],
        ["podman", "exec", "-i", "dev"]
    );
    assert_eq!(
        hosts.get("b").unwrap().argv(None)[..4],
        ["docker", "exec", "-i", "ci"]
    );
    assert!(hosts.get("c").unwrap().via().ends_with("(image debian:12)"));
    assert_eq!(hosts.get("d").unwrap().via(), "kubectl pod ns/web-0");
    assert_eq!(hosts.get("e").unwrap().via(), "kubectl pod solo");
}

#[test]
fn groups_name_hosts_by_list_and_pattern() {
    let hosts = load_with(
        None,
        &[
            (
                "CUBA_EXEC_HOSTS",
                "web1=ssh:a,web2=ssh:b,web3=ssh:c,db=ssh:d",
            ),
            ("CUBA_EXEC_ALLOWED_HOSTS", "web1,web2,db"),
        ],
    )
    .unwrap();
    assert!(is_group("web*") && is_group("a,b") && !is_group("web1"));
    // Only what policy allows; each once; `local` when named.
    assert_eq!(hosts.group("web*").unwrap(), ["web1", "web2"]);
    assert_eq!(
        hosts.group("db, web*, web1").unwrap(),
        ["db", "web1", "web2"]
    );
    assert_eq!(hosts.group("local,db").unwrap(), ["local", "db"]);
    assert_eq!(hosts.group("*").unwrap(), ["local", "db", "web1", "web2"]);
    let none = hosts.group("gpu*").unwrap_err();
    assert!(none.contains("no host matches \"gpu*\""), "{none}");
    let denied = hosts.group("web1,web3").unwrap_err();
    assert!(denied.contains("not allowed by policy"), "{denied}");
    let empty = hosts.group("web1,,db").unwrap_err();
    assert!(empty.contains("empty item"), "{empty}");
    assert_eq!(hosts.parallel(), DEFAULT_PARALLEL);
}
