"""EpochFileCache: which master epoch wrote which stretch of the commit log (RocketMQ 5's
store/ha/autoswitch/EpochFileCache, same file: `storePathRootDir/epochFileCheckpoint`).

Each entry is (epoch, startOffset); an entry ends where the next starts, the last at the log's
end. A broker promoted to master appends (its new epoch, its max offset). A broker that follows
a master compares its entries with the master's: the newest epoch both hold with the same start
is where the logs agree, up to the smaller of the two ends; past that point its own log is
another master's unreplicated tail and is cut (`consistent_point`).

The file is Java's CheckpointFile: the entry count, the CRC32 of the entry lines, then one
``epoch-startOffset`` line per entry.
"""

from __future__ import annotations

import os
import zlib
from dataclasses import dataclass
from pathlib import Path

__all__ = ["EPOCH_FILE", "EpochEntry", "EpochFileCache", "consistent_point"]

EPOCH_FILE = "epochFileCheckpoint"
NO_END = (1 << 63) - 1  # Java's Long.MAX_VALUE: the last entry runs to the log's end


@dataclass(frozen=True, slots=True)
class EpochEntry:
    epoch: int
    start_offset: int
    end_offset: int = NO_END

    def to_json(self) -> dict[str, int]:
        return {"epoch": self.epoch, "startOffset": self.start_offset, "endOffset": self.end_offset}


def _with_ends(entries: list[EpochEntry], max_offset: int) -> list[EpochEntry]:
    out = []
    for i, e in enumerate(entries):
        end = entries[i + 1].start_offset if i + 1 < len(entries) else max_offset
        out.append(EpochEntry(e.epoch, e.start_offset, end))
    return out


def consistent_point(local: list[EpochEntry], local_max: int, remote: list[EpochEntry],
                     remote_max: int) -> int:
    """findConsistentPoint: the offset up to which both logs were written by the same masters,
    or -1 when they share no epoch."""
    theirs = {e.epoch: e for e in _with_ends(remote, remote_max)}
    for mine in reversed(_with_ends(local, local_max)):
        other = theirs.get(mine.epoch)
        if other is not None and other.start_offset == mine.start_offset:
            return min(mine.end_offset, other.end_offset)
    return -1


class EpochFileCache:
    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.path = Path(root) / EPOCH_FILE
        self.entries: list[EpochEntry] = []

    def load(self) -> None:
        try:
            lines = self.path.read_text().splitlines()
        except FileNotFoundError:
            return
        body = lines[2:]
        if len(lines) < 2 or int(lines[0]) != len(body):
            raise ValueError(f"{self.path}: bad entry count")
        text = "".join(line + "\n" for line in body)
        if zlib.crc32(text.encode()) & 0x7FFFFFFF != int(lines[1]):
            raise ValueError(f"{self.path}: checksum mismatch")
        self.entries = [EpochEntry(int(a), int(b)) for a, b in (line.split("-") for line in body)]

    def _flush(self) -> None:
        text = "".join(f"{e.epoch}-{e.start_offset}\n" for e in self.entries)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(f"{len(self.entries)}\n{zlib.crc32(text.encode()) & 0x7FFFFFFF}\n{text}")
        os.replace(tmp, self.path)

    @property
    def last_epoch(self) -> int:
        return self.entries[-1].epoch if self.entries else 0

    def append(self, epoch: int, start_offset: int) -> bool:
        """A new epoch from `start_offset` on; ignored unless it is newer than the last."""
        last = self.entries[-1] if self.entries else None
        if last is not None and (epoch <= last.epoch or start_offset < last.start_offset):
            return False
        self.entries.append(EpochEntry(epoch, start_offset))
        self._flush()
        return True

    def truncate_suffix_by_offset(self, offset: int) -> None:
        """Forget the epochs that start at or after `offset` (the log is cut there)."""
        kept = [e for e in self.entries if e.start_offset < offset]
        if kept != self.entries:
            self.entries = kept
            self._flush()

    def with_ends(self, max_offset: int) -> list[EpochEntry]:
        return _with_ends(self.entries, max_offset)
