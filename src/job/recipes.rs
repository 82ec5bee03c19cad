//! The built-in recipes: job files that re-run the published experiments
//! (`../shared/published-experiments.md`), embedded in the binary so `stowbench recipe run NAME`
//! works anywhere. `--scale F` shrinks every count, size and duration of a recipe by F (1 is the
//! published size); server targets without a configured server are skipped with the reason and
//! the command that would enable them.

use super::spec::{self, JobSpec};
use super::Plan;
use crate::report::model::{RecipeRun, SkippedTarget};
use crate::units::{ByteSize, Nanos};

/// One built-in recipe.
#[derive(Debug)]
pub struct Recipe {
    /// Name on the command line.
    pub name: &'static str,
    /// The question it answers, in one line.
    pub question: &'static str,
    /// Whether parts of it need root (making filesystems, dropping caches).
    pub needs_root: bool,
    /// How long it takes at scale 1 on the development machine (2 cores, ext4 on virtio), and how
    /// that was found.
    pub time_at_scale_1: &'static str,
    /// The job file.
    pub text: &'static str,
}

/// Every built-in recipe, in list order.
pub const RECIPES: &[Recipe] = &[
    Recipe {
        name: "quick",
        question: "Files, SQLite BLOBs or SQLite row + file, for 4 KiB to 16 MiB objects? (what `stowbench run` runs)",
        needs_root: false,
        time_at_scale_1: "30 s to 1 min (measured on 2 cores: 30 s and 36 s, then 55 s and 63 s on a day of a slower disk, 17 s of which were SQLite's puts; 10 s hold the get phases open for their 100 ms)",
        text: super::QUICK_RECIPE,
    },
    Recipe {
        name: "e1-filestream",
        question: "E1: the object inside its row or in a file beside it — and at which size does the file win?",
        needs_root: false,
        time_at_scale_1: "about 23 min with every server (measured: 22 min for six targets, 34 s for mariadb-file)",
        text: include_str!("../../recipes/e1-filestream.toml"),
    },
    Recipe {
        name: "e2-container-growth",
        question: "E2: many objects in one container file (CFB, zip, pack) or one file each?",
        needs_root: false,
        time_at_scale_1: "about 1 min",
        text: include_str!("../../recipes/e2-container-growth.toml"),
    },
    Recipe {
        name: "e3-fio-filesystems",
        question: "E3: IOPS and MB/s against queue depth, block size and filesystem (fio)",
        needs_root: true,
        time_at_scale_1: "about 40 min (192 fio cases of 12 s)",
        text: include_str!("../../recipes/e3-fio-filesystems.toml"),
    },
    Recipe {
        name: "e4-data-files",
        question: "E4: do more data files speed up 16 concurrent writers? (SQLite files, PostgreSQL tablespaces, fio)",
        needs_root: true,
        time_at_scale_1: "about 12 min (measured 11 min 43 s: 25 SQLite cases of 1-2 s, 25 PostgreSQL cases of 7-23 s under other load, 25 fio runs of 11 s)",
        text: include_str!("../../recipes/e4-data-files.toml"),
    },
    Recipe {
        name: "e5-file-server",
        question: "E5: a file server's uploads and downloads on the filesystem, a database or GridFS (hash, register, write)?",
        needs_root: false,
        time_at_scale_1: "about 2.5 h without gridfs (extrapolated from 100 files × 3 repeats in 8.9 min); far longer with gridfs on FerretDB, whose reads scan the whole bucket (docs/recipes.md)",
        text: include_str!("../../recipes/e5-file-server.toml"),
    },
];

/// The recipe called `name`, or an error listing the others (with a did-you-mean).
/// The recipe named `name`, or the one an experiment's short name names ("e1" or "E1" for
/// e1-filestream, as the published experiments are called).
pub fn find(name: &str) -> Result<&'static Recipe, String> {
    let short = format!("{}-", name.to_lowercase());
    let mut by_short = RECIPES.iter().filter(|r| r.name.starts_with(&short));
    let by_short = by_short.next().filter(|_| by_short.next().is_none());
    RECIPES.iter().find(|r| r.name == name).or(by_short).ok_or_else(|| {
        let names: Vec<&str> = RECIPES.iter().map(|r| r.name).collect();
        let hint = crate::suggest::did_you_mean(name, &names).map(|s| format!(" Did you mean \"{s}\"?")).unwrap_or_default();
        format!("no recipe named \"{name}\".{hint} Recipes: {} (stowbench recipe list)", names.join(", "))
    })
}

/// The server backends a recipe's targets use (e.g. ["postgres", "mariadb"]), in job order.
pub fn servers_used(recipe: &Recipe) -> Vec<String> {
    let Ok(job) = spec::parse(recipe.text) else { return Vec::new() };
    let mut servers: Vec<String> = Vec::new();
    for target in &job.targets {
        let backend = &target.get_ref().backend;
        if crate::backend::server::is_server_backend(backend) && !servers.contains(backend) {
            servers.push(backend.clone());
        }
    }
    servers
}

/// The recipe's plan at `scale`: counts, sizes and durations multiplied by it, server targets
/// without a configured server left out (and listed in the plan's `recipe` record).
pub fn plan(recipe: &Recipe, scale: f64) -> Result<Plan, String> {
    if !(scale > 0.0 && scale <= 1000.0) {
        return Err(format!("--scale {scale}: use a factor above 0 and at most 1000 (e.g. 0.1 for a tenth of the published size, 1 for all of it)"));
    }
    let source = format!("built-in recipe {}", recipe.name);
    let mut job = spec::parse(recipe.text).map_err(|e| format!("{source}: {}", e.message))?;
    scale_job(&mut job, scale);
    // The recipe itself plans at scale 1 (a test checks): a mistake here is the scale's doing.
    let mut plan = super::check::build(&job, &source, recipe.text).map_err(|e| {
        if scale == 1.0 {
            e
        } else {
            format!("{e}\n(at --scale {scale}: every size, count and duration is multiplied by it; a larger scale keeps them apart)")
        }
    })?;
    let mut skipped = Vec::new();
    for target in &plan.targets {
        if let Some((reason, enable)) = crate::backend::server::unconfigured(&target.backend, &target.options) {
            skipped.push(SkippedTarget { target: target.name.clone(), reason, enable });
        }
    }
    if !skipped.is_empty() {
        let keep: Vec<String> = plan.targets.iter().map(|t| t.name.clone()).filter(|name| !skipped.iter().any(|s| s.target == *name)).collect();
        plan.retain_targets(&keep)?;
    }
    plan.recipe = Some(RecipeRun { name: recipe.name.to_string(), scale, skipped_targets: skipped });
    Ok(plan)
}

/// Multiplies every count, size and duration of `job` by `factor` (each at least 1).
fn scale_job(job: &mut JobSpec, factor: f64) {
    if factor == 1.0 {
        return;
    }
    let count = |n: u64| ((n as f64 * factor).round() as u64).max(1);
    let bytes = |b: ByteSize| ByteSize(round_scaled_size(b.0, count(b.0)));
    let time = |t: Nanos| Nanos(count(t.0));
    for workload in &mut job.workloads {
        let w = workload.get_mut();
        let exact: Vec<u64> = w.sizes.iter().map(|s| count(s.0)).collect();
        let rounded: Vec<u64> = w.sizes.iter().map(|s| bytes(*s).0).collect();
        // Rounding must not merge two sizes the exact product keeps apart.
        let distinct = |v: &[u64]| v.iter().collect::<std::collections::BTreeSet<_>>().len();
        let chosen = if distinct(&rounded) == distinct(&exact) { rounded } else { exact };
        w.sizes.iter_mut().zip(chosen).for_each(|(s, b)| *s = ByteSize(b));
        if let Some(dist) = w.size_dist.as_mut() {
            dist.min = bytes(dist.min);
            dist.max = bytes(dist.max);
        }
        // Object counts shrink with the factor too: a dataset shrinks by it twice (once for the
        // smaller objects, once for fewer of them).
        w.objects = w.objects.map(count);
        w.dataset = w.dataset.map(|d| bytes(bytes(d)));
        w.min_objects = w.min_objects.map(count);
        w.max_objects = w.max_objects.map(count);
        for phase in w.phase_tables.iter_mut().map(toml::Spanned::get_mut) {
            phase.count = phase.count.map(count);
            phase.bytes = phase.bytes.map(bytes);
            phase.duration = phase.duration.map(time);
            phase.min_duration = phase.min_duration.map(time);
            phase.warmup_count = phase.warmup_count.map(count);
            phase.warmup = phase.warmup.map(time);
        }
    }
    for sweep in &mut job.fio {
        let s = sweep.get_mut();
        // Each file must hold whole blocks, and a size split over files must split evenly: round
        // to a multiple of the largest block times every file count.
        let largest_block = s.bs.iter().map(|b| b.0).max().unwrap_or(1);
        let files = s.nrfiles.iter().fold(1u64, |acc, n| lcm(acc, u64::from(*n).max(1)));
        let unit = largest_block.saturating_mul(files).max(1);
        s.size.iter_mut().for_each(|v| *v = ByteSize(bytes(*v).0.div_ceil(unit) * unit));
        s.runtime = time(s.runtime);
        s.ramp_time = time(s.ramp_time);
    }
}

/// `scaled` (a size `original` times the scale) rounded to whole units of the largest unit of
/// which it holds at least ten, binary for a size given in KiB/MiB/GiB and decimal otherwise, so
/// that 1MiB at 0.01 reads "10KiB" rather than "10486B" (within 5 % of the exact product).
fn round_scaled_size(original: u64, scaled: u64) -> u64 {
    let units: [u64; 3] = if original % 1024 == 0 { [1 << 30, 1 << 20, 1 << 10] } else { [1_000_000_000, 1_000_000, 1_000] };
    match units.into_iter().find(|unit| scaled >= 10 * unit) {
        Some(unit) => (scaled + unit / 2) / unit * unit,
        None => scaled,
    }
}

fn lcm(a: u64, b: u64) -> u64 {
    let gcd = |mut x: u64, mut y: u64| {
        while y != 0 {
            (x, y) = (y, x % y);
        }
        x
    };
    a / gcd(a, b) * b
}

/// `stowbench recipe list`: one block per recipe.
pub fn list() -> String {
    let mut out = String::new();
    for r in RECIPES {
        let servers = servers_used(r);
        let mut needs: Vec<String> = Vec::new();
        if r.needs_root {
            needs.push("root".into());
        }
        if !servers.is_empty() {
            needs.push(format!("servers: {} (optional; skipped when not configured)", servers.join(", ")));
        }
        if needs.is_empty() {
            needs.push("nothing beyond stowbench".into());
        }
        out.push_str(&format!("{}\n    {}\n    needs {}; {} at scale 1\n", r.name, r.question, needs.join(", "), r.time_at_scale_1));
    }
    out.push_str(
        "\nstowbench recipe show NAME prints a recipe's job file (copy and edit it); \
                  stowbench recipe run NAME [--scale F] [--targets a,b] runs it.\n",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_experiments_short_name_finds_its_recipe() {
        for (given, found) in [("e1", "e1-filestream"), ("E4", "e4-data-files"), ("e5-file-server", "e5-file-server"), ("quick", "quick")] {
            assert_eq!(find(given).map(|r| r.name), Ok(found), "{given}");
        }
        let err = find("e9").err().unwrap();
        assert!(err.starts_with("no recipe named \"e9\"") && err.contains("e1-filestream"), "{err}");
        assert!(find("e").is_err(), "a prefix of several is no name");
    }

    #[test]
    fn every_recipe_plans_at_full_and_tiny_scale() {
        for r in RECIPES {
            let full = plan(r, 1.0).unwrap_or_else(|e| panic!("{}: {e}", r.name));
            let tiny = plan(r, 0.01).unwrap_or_else(|e| panic!("{} at 0.01: {e}", r.name));
            assert_eq!(tiny.recipe.as_ref().map(|x| x.scale), Some(0.01));
            assert_eq!(full.cases.len(), tiny.cases.len(), "{}: scaling changes sizes, not the matrix", r.name);
        }
    }

    #[test]
    fn scale_shrinks_counts_sizes_and_durations() {
        let mut job = spec::parse(
            "version = 1\n[[workload]]\nname = \"w\"\nsizes = [\"2.6MB\"]\nobjects = 1000\n[[workload.phase]]\nsequence = [\"put\", \"get\"]\ncount = 1000\nduration = \"10s\"\n",
        )
        .unwrap();
        scale_job(&mut job, 0.1);
        let w = job.workloads[0].get_ref();
        assert_eq!(w.sizes[0].0, 260_000);
        assert_eq!(w.objects, Some(100));
        assert_eq!(w.phase_tables[0].get_ref().count, Some(100));
        assert_eq!(w.phase_tables[0].get_ref().duration.map(|d| d.0), Some(1_000_000_000));
    }

    #[test]
    fn scaled_sizes_keep_their_kind_of_unit_and_stay_apart() {
        let mut job =
            spec::parse("version = 1\n[[workload]]\nname = \"w\"\nsizes = [\"4KiB\", \"256KiB\", \"1MiB\", \"16MiB\", \"94kB\", \"2.6MB\"]\nobjects = 10\n")
                .unwrap();
        scale_job(&mut job, 0.01);
        let labels: Vec<String> = job.workloads[0].get_ref().sizes.iter().map(|s| s.label()).collect();
        assert_eq!(labels, ["41B", "2621B", "10KiB", "164KiB", "940B", "26kB"]);
        // 10KiB and 10.2KiB both round to 10KiB at this scale: the exact products are kept.
        let mut job = spec::parse("version = 1\n[[workload]]\nname = \"w\"\nsizes = [\"1000KiB\", \"1020KiB\"]\nobjects = 10\n").unwrap();
        scale_job(&mut job, 0.01);
        let labels: Vec<String> = job.workloads[0].get_ref().sizes.iter().map(|s| s.label()).collect();
        assert_eq!(labels, ["10KiB", "10445B"]);
    }

    #[test]
    fn unknown_names_and_scales_are_refused_with_the_fix() {
        assert!(find("e1-filestraem").unwrap_err().contains("Did you mean \"e1-filestream\""));
        assert!(plan(find("quick").unwrap(), 0.0).unwrap_err().contains("above 0"));
        // So small that 4KiB and 94kB both become 1 byte: one case id for two sizes.
        let merged = plan(find("e1-filestream").unwrap(), 1e-6).unwrap_err();
        assert!(merged.contains("1B is listed twice") && merged.contains("at --scale 0.000001"), "{merged}");
    }
}
