"""`rmq lag` on a store of 10,000 queues and 1,000 consumer groups, beside reading
config/consumerOffset.json alone (the least any lag report must do). Target: under 1 s.

The store (``bench-data/lag-store``, made once): 1,000 topics of 10 queues, two messages in each
queue, and 1,000 groups, each with an offset committed on every queue of its own topic (one message
consumed, one not): 10,000 rows, each with the store times of its last consumed and oldest unconsumed
message. Figures are printed, never asserted.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STORE = ROOT / "bench-data" / "lag-store"
TOPICS, QUEUES = 1_000, 10
TARGET_S = 1.0


def ensure_store() -> None:
    from rmqcli.store.settings import StoreSettings
    from rmqcli.store.write.messages import Message
    from rmqcli.store.write.writer import StoreWriter

    marker = STORE / ".bench-lag"
    if marker.exists():
        return
    subprocess.run(["rm", "-rf", str(STORE)], check=True)
    print(f"generating {STORE} ...", flush=True)
    settings = StoreSettings(
        mapped_file_size_commitlog=64 * 1024 * 1024,
        mapped_file_size_consume_queue=600,
        max_hash_slot_num=64,
        max_index_num=256,
        message_index_enable=False,
        explicit=frozenset({"mapped_file_size_commitlog", "mapped_file_size_consume_queue"}),
    )
    writer = StoreWriter(STORE, settings)
    try:
        for t in range(TOPICS):
            topic = f"LagTopic{t}"
            writer.config.set_topic(topic, QUEUES, 0)
            for _ in range(2):
                for q in range(QUEUES):
                    writer.append(Message(topic, q, b"x" * 100))
            for q in range(QUEUES):
                writer.config.set_consumer_offset(topic, f"LagGroup{t}", q, 1)
    finally:
        writer.close()
    marker.touch()


def best(cmd: list[str], repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True, cwd=ROOT)
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    ensure_store()
    python = sys.executable
    read_offsets = [
        python,
        "-c",
        "import sys; from pathlib import Path; from rmqcli.store.configfiles import load_config, "
        "parse_consumer_offsets; t = parse_consumer_offsets(load_config(Path(sys.argv[1]), "
        "'consumerOffset.json').data, 'x'); print(sum(len(q) for q in t.values()))",
        str(STORE / "config"),
    ]
    baseline = best(read_offsets)
    lag_s = best([python, "-m", "rmqcli.cli.main", "lag", str(STORE), "--json"])
    print(f"\nrmq lag: {TOPICS * QUEUES:,} queues, {TOPICS:,} groups, {TOPICS * QUEUES:,} rows")
    print(f"  reading consumerOffset.json alone (baseline, with interpreter start) {baseline:6.3f} s")
    print(
        f"  rmq lag --json                                                     {lag_s:6.3f} s"
        f"  ({lag_s / baseline:.1f}x the baseline; target under {TARGET_S:.0f} s: "
        f"{'met' if lag_s < TARGET_S else 'missed'})"
    )


if __name__ == "__main__":
    main()
