//! `stormpi-info`: the build's facts and every run-time parameter with its value and source.

use std::process::Command;

use stormpi_tests::artifact;

fn info(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut cmd = Command::new(artifact("stormpi-info"));
    cmd.args(args).env_remove("STORMPI_MCA_CMDLINE");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("stormpi-info runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn lists_components_and_parameters_with_defaults() {
    let (code, out, err) = info(&[], &[]);
    assert_eq!(code, 0, "{err}");
    for want in [
        "Package: stormpi ",
        "btl sm    (exclusivity 1000)",
        "btl tcp   (exclusivity 100)",
        "  mpi_memory_max = ",
        "  btl_tcp_if_include = \"\" (default \"\", from default, text)",
    ] {
        assert!(out.contains(want), "missing `{want}`:\n{out}");
    }
}

#[test]
fn values_say_where_they_were_set() {
    let (code, out, err) = info(
        &["--parsable", "--param", "all", "--mca", "coll_sm", "off"],
        &[("STORMPI_MCA_btl", "sm,self")],
    );
    assert_eq!(code, 0, "{err}");
    for want in [
        "param:btl:value:sm,self",
        "param:btl:source:environment",
        "param:coll_sm:value:off",
        "param:coll_sm:source:command line",
        "param:coll_hier:source:default",
        "param:btl_tcp_user_timeout:type:int:0:3600000",
    ] {
        assert!(out.lines().any(|l| l == want), "missing `{want}`:\n{out}");
    }
    assert!(
        !out.contains("package:"),
        "--param drops the header:\n{out}"
    );
    let conf = std::env::temp_dir().join(format!("stormpi-info-{}.conf", std::process::id()));
    std::fs::write(&conf, "pml_max_requests = 8k\n").unwrap();
    let (code, out, err) = info(
        &["--parsable", "--param", "all"],
        &[("STORMPI_MCA_CONF", conf.to_str().unwrap())],
    );
    let _ = std::fs::remove_file(&conf);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.lines()
            .any(|l| l == "param:pml_max_requests:source:file"),
        "{out}"
    );
}

#[test]
fn one_component_and_bad_input() {
    let (code, out, _) = info(&["--param", "btl", "tcp"], &[]);
    assert_eq!(code, 0);
    let names: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("  ") && !l.starts_with("      "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(
        !names.is_empty() && names.iter().all(|n| n.starts_with("btl_tcp_")),
        "{out}"
    );
    let (code, _, err) = info(&["--param", "nosuch"], &[]);
    assert_eq!(code, 2);
    assert!(err.contains("nosuch_"), "{err}");
    let (code, _, err) = info(&[], &[("STORMPI_MCA_btl_tcp_user_timeout", "soon")]);
    assert_eq!(code, 1);
    assert!(err.contains("btl_tcp_user_timeout"), "{err}");
    let (code, _, err) = info(&["--frob"], &[]);
    assert_eq!(code, 2);
    assert!(err.contains("--frob"), "{err}");
}
