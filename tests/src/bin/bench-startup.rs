//! Start-up cost: the wall time of a job whose ranks only call `MPI_Init` and `MPI_Finalize`
//! (bench/startup.c), from the launcher's start to its exit, at several rank counts (more ranks
//! than cores run oversubscribed), under each launcher in one run: stormpi under `stormrun`,
//! under a one-node Slurm's `srun --mpi=pmi2` and `--mpi=pmix`; Open MPI under its `mpirun`;
//! MPICH under Hydra's `mpiexec`. Each figure is the best of `--reps` runs (interleaved), in
//! milliseconds. Run by `ci/bench-startup.sh`, which builds the program three ways first.
//!
//! ```text
//! bench-startup --storm PROG --ompi PROG --mpich PROG [--np "2 8 32"] [--reps N]
//! ```

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use stormpi_tests::slurm::Slurm;

/// Longest one launch may take before it counts as failed.
const LIMIT: Duration = Duration::from_secs(120);

struct Args {
    storm: Option<PathBuf>,
    ompi: Option<PathBuf>,
    mpich: Option<PathBuf>,
    nps: Vec<u32>,
    reps: u32,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        storm: None,
        ompi: None,
        mpich: None,
        nps: vec![2, 8, 32],
        reps: 3,
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < argv.len() {
        let val = argv
            .get(i + 1)
            .cloned()
            .ok_or(format!("{} needs a value", argv[i]))?;
        match argv[i].as_str() {
            "--storm" => a.storm = Some(val.into()),
            "--ompi" => a.ompi = Some(val.into()),
            "--mpich" => a.mpich = Some(val.into()),
            "--np" => {
                a.nps = val
                    .split_whitespace()
                    .map(|n| n.parse().map_err(|_| format!("--np: `{n}`")))
                    .collect::<Result<_, _>>()?
            }
            "--reps" => a.reps = val.parse().map_err(|_| format!("--reps: `{val}`"))?,
            other => return Err(format!("unknown option `{other}`")),
        }
        i += 2;
    }
    Ok(a)
}

/// Runs `cmd` to completion; its wall time, or why it failed.
fn time(mut cmd: Command) -> Result<Duration, String> {
    let start = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {cmd:?}: {e}"))?;
    loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            let took = start.elapsed();
            if status.success() {
                return Ok(took);
            }
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut e, &mut err);
            }
            return Err(format!("{cmd:?}: {status}: {}", err.trim()));
        }
        if start.elapsed() > LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("{cmd:?}: still running after {LIMIT:?}"));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn main() {
    let args = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("bench-startup: {e}");
            std::process::exit(2);
        }
    };
    let slurm = match Slurm::start() {
        Ok(s) => Some(s),
        Err(why) => {
            eprintln!("bench-startup: no Slurm here ({why}); srun columns left out");
            None
        }
    };
    type Launch<'a> = (&'static str, Box<dyn Fn(u32) -> Option<Command> + 'a>);
    let storm = args.storm.clone();
    let stormrun = std::env::var("STORMRUN").unwrap_or_else(|_| "target/release/stormrun".into());
    let launchers: Vec<Launch> = vec![
        (
            "stormrun",
            Box::new(|np| {
                let mut c = Command::new(&stormrun);
                c.args(["-n", &np.to_string(), "--oversubscribe"])
                    .arg(storm.as_ref()?);
                Some(c)
            }),
        ),
        (
            "srun pmi2",
            Box::new(|np| {
                let mut c = slurm.as_ref()?.srun();
                c.args(["-O", "-n", &np.to_string(), "--mpi=pmi2"])
                    .arg(args.storm.as_ref()?);
                Some(c)
            }),
        ),
        (
            "srun pmix",
            Box::new(|np| {
                let mut c = slurm.as_ref()?.srun();
                c.args(["-O", "-n", &np.to_string(), "--mpi=pmix"])
                    .arg(args.storm.as_ref()?);
                Some(c)
            }),
        ),
        (
            "Open MPI",
            Box::new(|np| {
                let mut c = Command::new("mpirun.openmpi");
                c.args(["-n", &np.to_string(), "--oversubscribe"])
                    .arg(args.ompi.as_ref()?)
                    .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
                    .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
                Some(c)
            }),
        ),
        (
            "MPICH",
            Box::new(|np| {
                let mut c = Command::new("mpiexec.mpich");
                c.args(["-n", &np.to_string()]).arg(args.mpich.as_ref()?);
                Some(c)
            }),
        ),
    ];
    println!(
        "Start-up: wall time of an MPI_Init + MPI_Finalize job, ms (best of {})",
        args.reps
    );
    print!("{:>5}", "ranks");
    for (name, _) in &launchers {
        print!(" {name:>10}");
    }
    println!(" {:>10} {:>10}", "storm/OMPI", "storm/MPICH");
    let mut failed = false;
    for &np in &args.nps {
        let mut best: Vec<Option<Duration>> = vec![None; launchers.len()];
        for _ in 0..args.reps {
            for (i, (name, make)) in launchers.iter().enumerate() {
                let Some(cmd) = make(np) else { continue };
                match time(cmd) {
                    Ok(t) => best[i] = Some(best[i].map_or(t, |b| b.min(t))),
                    Err(e) => {
                        eprintln!("bench-startup: {name} at {np} ranks: {e}");
                        failed |= i == 0;
                    }
                }
            }
        }
        print!("{np:>5}");
        for b in &best {
            match b {
                Some(t) => print!(" {:>10.1}", t.as_secs_f64() * 1e3),
                None => print!(" {:>10}", "-"),
            }
        }
        let ratio = |i: usize| match (best[0], best[i]) {
            (Some(a), Some(b)) => format!("{:.2}", a.as_secs_f64() / b.as_secs_f64()),
            _ => "-".into(),
        };
        println!(" {:>10} {:>10}", ratio(3), ratio(4));
    }
    if failed {
        std::process::exit(1);
    }
}
