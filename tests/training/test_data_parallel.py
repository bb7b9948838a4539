"""train.py --data-parallel: the checks before msrun, the sharding, and (slow: real msrun jobs,
~25 s of startup each) 2 workers x batch b against 1 process x batch 2b."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

from helpers.paths import ROOT
from helpers.tiny_runs import MSRUN_ENV, TINY_MODEL, corpus, sentiment_tsv, tiny

from albert_min.tasks.pretraining import features as pretraining_features
from albert_min.tasks.pretraining import metric as pretraining_metric
from albert_min.model.folder import read_checkpoint
from albert_min.common.parallel import MSRUN_VARIABLES, DataParallel, SingleProcess


def without_msrun_env():
    return {k: v for k, v in os.environ.items() if k not in MSRUN_VARIABLES}


def run_train(args, env):
    return subprocess.run([sys.executable, "train.py", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=60)


def test_data_parallel_without_msrun_is_a_one_line_error(tmp_path):
    done = run_train(["--train", "x/train.tsv", "--output", str(tmp_path / "m"), "--data-parallel"],
                     without_msrun_env())
    assert done.returncode == 2
    assert done.stderr.startswith("error: --data-parallel must run under msrun (")
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert not os.listdir(tmp_path)


def test_global_batch_must_divide_over_the_workers(tmp_path):
    done = run_train(["--train", "x/train.tsv", "--output", str(tmp_path / "m"), "--data-parallel",
                      "--batch-size", "15"], {**without_msrun_env(), **MSRUN_ENV})
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip() == ("error: --batch-size 15 (the global batch) must be a multiple of the "
                                   "2 data-parallel workers")


def worker(rank, size):
    """A DataParallel as rank ``rank`` of ``size`` sees it, without joining a job (only the arithmetic)."""
    parallel = object.__new__(DataParallel)
    parallel.rank, parallel.size, parallel.writes = rank, size, rank == 0
    return parallel


@pytest.mark.parametrize("rows", [16, 10, 7, 3, 1])
def test_shards_are_equal_disjoint_and_cover_all_but_the_remainder(rows):
    shards = [worker(rank, 3).shard(rows) for rank in range(3)]
    if rows < 3:
        assert shards == [None] * 3   # skipped by every worker alike
        return
    taken = [i for s in shards for i in range(rows)[s]]
    assert len({len(range(rows)[s]) for s in shards}) == 1
    assert taken == list(range(rows - rows % 3))
    assert SingleProcess().shard(rows) == slice(0, rows)


def test_steps_per_epoch_count_the_batches_that_are_not_skipped():
    assert [worker(0, 4).steps(n, 16) for n in (64, 66, 68, 79)] == [4, 4, 5, 5]
    assert SingleProcess().steps(66, 16) == 5


def test_pretraining_shard_keeps_each_examples_masked_positions():
    rng = np.random.default_rng(0)
    B, S, P = 4, 8, 2
    ids = rng.integers(5, 50, (B, S)).astype(np.int32)
    positions = np.sort(rng.choice(S, (B, P)), axis=1).astype(np.int32)
    batch = (ids, ids * 0, ids * 0 + 1, (positions + S * np.arange(B)[:, None]).reshape(-1),
             rng.integers(5, 50, B * P), rng.random(B * P).astype(np.float32), np.arange(B))
    for rows in (slice(0, 2), slice(2, 4)):
        part = pretraining_features.shard_batch(batch, rows)
        assert part[0].shape == (2, S) and part[3].shape == part[4].shape == part[5].shape == (2 * P,)
        np.testing.assert_array_equal(part[0].reshape(-1)[part[3]], batch[0].reshape(-1)[batch[3]][rows.start * P:rows.stop * P])
        np.testing.assert_array_equal(part[4], batch[4][rows.start * P:rows.stop * P])
        np.testing.assert_array_equal(part[6], batch[6][rows])


def test_heldout_shares_of_the_workers_add_up_to_the_whole_evaluation():
    """Each worker scores every size-th held-out batch; the summed counts are the single-process numbers."""
    from tokenizer import AlbertTokenizer
    from albert_min.model.config import AlbertConfig
    from albert_min.model.heads import AlbertForPreTraining
    tok = AlbertTokenizer(os.path.join(ROOT, "weights", "pretrained-small", "spiece.model"))
    words = "the film was a quiet story about love loss and a long summer in new york".split()
    rng = np.random.default_rng(0)
    documents = [[tok.encode_ids(" ".join(rng.choice(words, 10)) + " .") for _ in range(6)] for _ in range(6)]
    heldout = pretraining_metric.HeldOut(documents, pretraining_features.PretrainingBatcher(tok, 32), 32, 4, seed=0)
    model = AlbertForPreTraining(AlbertConfig(vocab_size=tok.vocab_size, embedding_size=8, hidden_size=16,
                                              num_hidden_layers=1, num_attention_heads=2, intermediate_size=16))
    whole = heldout.counts(model, progress=False)
    shares = [heldout.counts(model, rank, 3, progress=False) for rank in range(3)]
    assert all(share[1].sum() > 0 for share in shares) and sum(len(b) for b in heldout.batches.values()) >= 6
    np.testing.assert_array_equal(sum(shares), whole)

    class Rank1Of3:   # as worker 1 of 3 sees it: its own share, and the AllReduce's sum of all three
        rank, size = 1, 3

        def sum(self, counts):
            np.testing.assert_array_equal(counts, shares[1])
            return sum(shares)

    assert heldout.evaluate(model, progress=False, parallel=Rank1Of3()) == heldout.evaluate(model, progress=False)


LOST = ("The total number of timed out node is {n}. Timed out node list is: [const vector]{{{nodes}}}, worker {first} "
        "is the first one timed out, please check its log.\n\n----------------------------------------------------\n"
        "- C++ Call Stack: (For framework developers)\n")


def test_lost_workers_are_one_error_naming_their_ranks_and_how_to_resume(tmp_path, monkeypatch):
    """Issue 44: a worker killed mid-run ended the job with MindSpore's RuntimeError (from msrun's scheduler,
    which runs train.py too and whose init() serves the job) and msrun's own traceback. The scheduler's
    error (here raised by a stand-in init) is now one line naming the ranks and how to go on."""
    import mindspore.communication as communication
    from albert_min.common.parallel import WorkersLost
    error = [RuntimeError(LOST.format(n=1, nodes="1", first=1))]

    def init():
        raise error[0]
    monkeypatch.setattr(communication, "init", init)
    monkeypatch.setenv("MS_CPU_COMM_OP_TIMEOUT", "600")     # DataParallel sets it where unset
    with pytest.raises(WorkersLost, match=r"^the data-parallel job lost a worker: MindSpore's scheduler stopped "
                                          r"hearing from rank 1 \(killed or crashed, or stopped by msrun once another "
                                          r"one died: see the logs in msrun's --log_dir\)$"):
        DataParallel()
    error[0] = RuntimeError("Some other failure of MindSpore")   # not ours to word: kept as it is
    with pytest.raises(RuntimeError, match="^Some other failure"):
        DataParallel()

    error[0] = RuntimeError(LOST.format(n=2, nodes="0, 1", first=0))
    for name, value in MSRUN_ENV.items():
        monkeypatch.setenv(name, value)
    import train
    out = str(tmp_path / "m")
    args = ["--train", sentiment_tsv(tmp_path / "t.tsv", 16, seed=0), "--output", out, "--data-parallel", *TINY_MODEL]
    with pytest.raises(SystemExit) as ended:
        train.main(args)
    assert ended.value.code == ("error: the data-parallel job lost a worker: MindSpore's scheduler stopped hearing "
                                "from ranks 0, 1 (killed or crashed, or stopped by msrun once another one died: see "
                                "the logs in msrun's --log_dir); nothing was saved yet: run the same msrun command "
                                "again")
    os.makedirs(out + ".state")
    open(os.path.join(out + ".state", "state.json"), "w").close()
    with pytest.raises(SystemExit) as ended:
        train.main(args)
    assert ended.value.code.endswith(f"; continue from the last saved state ({out}.state) with the same msrun "
                                     "command and --resume")


def within(seconds, look):
    """``look()``'s first non-empty answer, asked every 50 ms for up to ``seconds`` (a loaded machine
    delivers a kill, and the watcher's next poll, late); its last answer if none was."""
    deadline = time.monotonic() + seconds
    while True:
        seen = look()
        if seen or time.monotonic() > deadline:
            return seen
        time.sleep(0.05)


def test_the_scheduler_names_the_worker_that_died_first():
    """MindSpore's scheduler named rank 0 alone when rank 1 was killed (msrun kills the others at once):
    Deaths sees msrun's children (here this process's) die in order, zombies included; WorkerWatch runs it
    in a process of its own (MindSpore's init() holds the GIL while the scheduler serves the job)."""
    from albert_min.common.parallel import WorkersLost, join_job
    from albert_min.common.worker_watch import Deaths, WorkerWatch
    workers = [subprocess.Popen(["sleep", "60"], env={**os.environ, "MS_ROLE": "MS_WORKER", "RANK_ID": str(rank)})
               for rank in range(2)]
    try:
        deaths = Deaths(launcher=os.getpid())
        assert deaths.look() == [] and sorted(deaths.ranks.values()) == [0, 1]
        watch = WorkerWatch(launcher=os.getpid())      # the same, in a process of its own
        time.sleep(3)                                  # (a python start, a look: slower on a loaded machine)
        workers[1].kill()                              # not reaped yet: a zombie is dead too
        assert within(5, deaths.look) == [1]           # (a killed process is a zombie a moment later)
        time.sleep(0.6)
        workers[0].kill()
        assert within(5, deaths.look) == [0] and deaths.died == [1, 0]
        time.sleep(1.5)                                # (its next looks, every 0.2 s)
        assert watch.died == [1, 0]

        def init():
            raise RuntimeError(LOST.format(n=1, nodes="0", first=0))
        with pytest.raises(WorkersLost, match=r"^the data-parallel job lost rank 1 \(killed or crashed: see its log "
                                              r"in msrun's --log_dir; msrun then stopped the other workers\)$"):
            join_job(init, watch)
    finally:
        for worker in workers:
            worker.kill()
            worker.wait()


# ------------------------------------------------------------- real msrun jobs
def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def descendants(pid):
    """Process ids below ``pid`` (msrun starts its workers in sessions of their own)."""
    children = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        below = children.get(todo.pop(), [])
        found += below
        todo += below
    return found


def end(process):
    """Kill a job that is still running: msrun (or train.py) and every process it started."""
    if process.poll() is None:
        for pid in descendants(process.pid) + [process.pid]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        process.communicate()


def start_msrun(args, log_dir):
    command = ["msrun", "--worker_num", "2", "--local_worker_num", "2", "--master_port", str(free_port()),
               "--log_dir", str(log_dir), "--join", "True", "--cluster_time_out", "120",
               "train.py", *args, "--data-parallel"]
    return subprocess.Popen(command, cwd=ROOT, env=without_msrun_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def finish(process, log_dir, timeout=240):
    try:
        out, _ = process.communicate(timeout=timeout)
    finally:
        end(process)
    logs = "".join(open(os.path.join(log_dir, n)).read()[-3000:] for n in sorted(os.listdir(log_dir))
                   if n.startswith("worker")) if os.path.isdir(log_dir) else ""
    assert process.returncode == 0, out[-2000:] + logs
    return open(os.path.join(log_dir, "worker_0.log")).read()


@pytest.fixture
def processes():
    """Popen objects to end, with the workers they started, if the test fails half way."""
    started = []
    yield started
    for process in started:
        end(process)


def history(state_dir):
    with open(os.path.join(state_dir, "state.json")) as f:
        return json.load(f)["history"]


@pytest.mark.slow
@pytest.mark.parametrize("optimizer", [[], ["--optimizer", "lamb", "--grad-accum", "2"]], ids=["adamw", "lamb-accum"])
def test_two_workers_match_one_process_with_twice_the_batch(tmp_path, processes, optimizer):
    """40 examples, global batch 16 (2 x 8 per worker; the last batch 2 x 4), 2 epochs, dropout 0.
    --eval-every 1 records the loss after every step and has rank 0 evaluate and save while the other waits.
    LAMB with 2 micro-batches per step too: the workers average the accumulated gradients."""
    train_tsv = sentiment_tsv(tmp_path / "train.tsv", 40, seed=5)
    dev_tsv = sentiment_tsv(tmp_path / "dev.tsv", 16, seed=6)
    args = ["--train", train_tsv, "--dev", dev_tsv, "--epochs", "2", "--batch-size", "16", "--lr", "3e-3",
            "--dropout", "0", "--eval-every", "1", *TINY_MODEL, *optimizer]
    single = subprocess.Popen([sys.executable, "train.py", *args, "--output", str(tmp_path / "single")], cwd=ROOT,
                              env=without_msrun_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    processes.append(single)
    processes.append(start_msrun(args + ["--output", str(tmp_path / "dp")], tmp_path / "logs"))
    rank0_log = finish(processes[-1], tmp_path / "logs")
    _, err = single.communicate(timeout=240)
    assert single.returncode == 0, err[-2000:]

    one, two = history(tmp_path / "single.state"), history(tmp_path / "dp.state")
    assert [h["step"] for h in two] == [h["step"] for h in one] == [1, 2, 3, 4, 5, 6]
    np.testing.assert_allclose([h["train_loss"] for h in two], [h["train_loss"] for h in one], rtol=1e-5)
    assert [h["dev_accuracy"] for h in two] == [h["dev_accuracy"] for h in one]
    for folder in ("", ".state"):
        a = read_checkpoint(os.path.join(tmp_path, "single" + folder, "model.ckpt"))
        b = read_checkpoint(os.path.join(tmp_path, "dp" + folder, "model.ckpt"))
        for key in a:
            np.testing.assert_allclose(b[key], a[key], rtol=1e-4, atol=1e-6, err_msg=key)
    # Rank 0 reports, the other worker is silent; nothing but the two folders was written.
    assert "done: best score" in rank0_log
    assert "done: best score" not in open(tmp_path / "logs" / "worker_1.log").read()
    assert sorted(os.listdir(tmp_path)) == ["dev.tsv", "dp", "dp.state", "logs", "single",
                                            "single.state", "train.tsv"]   # the lock files are removed on release


@pytest.mark.slow
def test_pretraining_stops_together_on_max_minutes_and_resumes(tmp_path, processes):
    """Both workers agree when --max-minutes is up (else one would wait in an AllReduce the other never joins),
    rank 0 writes the state, and --resume under msrun continues from it."""
    text = corpus(tmp_path / "c.txt", n_docs=30)
    args = ["--task", "sop", "--text", text, "--output", str(tmp_path / "pre"), "--epochs", "1", *tiny()]
    processes.append(start_msrun(args + ["--max-minutes", "0.0001"], tmp_path / "logs1"))
    assert "stopped after --max-minutes" in finish(processes[-1], tmp_path / "logs1")
    assert history(tmp_path / "pre.state")[-1]["step"] == 1
    processes.append(start_msrun(args + ["--resume"], tmp_path / "logs2"))
    log = finish(processes[-1], tmp_path / "logs2")
    assert "resumed from" in log and "done: best score" in log
    with open(tmp_path / "pre.state" / "state.json") as f:
        assert json.load(f)["epoch"] == 1


@pytest.mark.slow
def test_two_workers_report_the_single_process_heldout_scores(tmp_path, processes):
    """Each worker scores half the held-out batches and AllReduce sums the counts. At lr 1e-9 both
    runs keep their (equal) initial weights to float precision, so the scores must agree exactly."""
    text = corpus(tmp_path / "c.txt", n_docs=200)   # 10 held-out documents: several batches per worker
    args = ["--task", "sop", "--text", text, "--max-steps", "1", "--lr", "1e-9", *tiny()]
    single = subprocess.run([sys.executable, "train.py", *args, "--output", str(tmp_path / "single")], cwd=ROOT,
                            env=without_msrun_env(), capture_output=True, text=True, timeout=240)
    assert single.returncode == 0, single.stderr[-2000:]
    processes.append(start_msrun(args + ["--output", str(tmp_path / "dp")], tmp_path / "logs"))
    finish(processes[-1], tmp_path / "logs")
    one, two = history(tmp_path / "single.state")[-1], history(tmp_path / "dp.state")[-1]
    scores = ["heldout_mlm_accuracy", "heldout_sop_accuracy", "heldout_nsp_accuracy"]
    pairs = re.search(r"\((\d+) SOP \+ \d+ NSP pairs\)", single.stdout)
    assert int(pairs.group(1)) >= 32   # batches of 8: at least 2 SOP batches per worker
    # One worker's half alone would give other fractions (SOP: of half the pairs; MLM: of half the pieces).
    assert [two[k] for k in scores] == [one[k] for k in scores] and 0 < one["heldout_sop_accuracy"] < 1


@pytest.mark.slow
def test_a_worker_killed_mid_run_ends_the_job_with_one_error_line(tmp_path, processes):
    """Issue 44: rank 1 killed (SIGKILL) after the first save. msrun kills the other worker at once, so the
    one process left to report is msrun's scheduler (train.py with MS_ROLE=MS_SCHED): its last line, which
    msrun shows before its own traceback ("Distributed job exited with exception"), names the ranks and
    --resume."""
    train_tsv = sentiment_tsv(tmp_path / "train.tsv", 2000, seed=5)
    out = str(tmp_path / "dp")
    job = start_msrun(["--train", train_tsv, "--output", out, "--epochs", "20", "--batch-size", "16", *TINY_MODEL],
                      tmp_path / "logs")
    processes.append(job)
    log = tmp_path / "logs" / "worker_0.log"
    deadline = time.monotonic() + 180
    while not (log.is_file() and "saved " in log.read_text(errors="replace")):
        assert time.monotonic() < deadline and job.poll() is None, "the job never saved"
        time.sleep(1)
    rank1 = [pid for pid in descendants(job.pid) if f"RANK_ID=1\0".encode() in open(f"/proc/{pid}/environ", "rb").read()
             and b"MS_WORKER" in open(f"/proc/{pid}/environ", "rb").read()]
    assert rank1, "rank 1 not found"
    os.kill(rank1[0], signal.SIGKILL)
    shown, _ = job.communicate(timeout=180)
    assert job.returncode != 0
    last = (tmp_path / "logs" / "scheduler.log").read_text(errors="replace").strip().splitlines()[-1]
    assert re.fullmatch(r"error: the data-parallel job lost rank 1 \(killed or crashed: see its log in msrun's "
                        r"--log_dir; msrun then stopped the other workers\); "
                        rf"continue from the last saved state \({re.escape(out)}\.state\) with the same msrun "
                        r"command and --resume", last), last
    assert last in shown   # msrun prints the scheduler's log lines around its errors, then its own traceback
    assert "Traceback" not in (tmp_path / "logs" / "scheduler.log").read_text(errors="replace")
