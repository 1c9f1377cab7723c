"""Where the slots' cgroups go, read from mounts and memberships as /proc shows them, over
folders that stand in for cgroup file systems: the cgroup v2 layouts cannot all be made on
one machine."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from qa.cgroups import CgroupsUnavailable, _bases, _Mount


def v2(point: Path, root: str = "/") -> _Mount:
    return _Mount(point=point, root=root, kind="cgroup2", options=frozenset({"rw"}))


def v1(point: Path, *controllers: str, root: str = "/") -> _Mount:
    return _Mount(point=point, root=root, kind="cgroup", options=frozenset({"rw", *controllers}))


def cgroup(folder: Path, hands_down: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "cgroup.subtree_control").write_text(f"{hands_down}\n")
    return folder


def test_v2_goes_below_this_process_cgroup_when_it_hands_memory_and_pids_down(
    tmp_path: Path,
) -> None:
    own = cgroup(tmp_path / "warmpool.service", "cpu memory pids")

    assert _bases([v2(tmp_path)], {"": "/warmpool.service"}) == (2, (own,))


def test_v2_goes_beside_this_process_in_a_cgroup_delegated_to_it(tmp_path: Path) -> None:
    service = cgroup(tmp_path / "warmpool.service", "memory pids")
    os.setxattr(service, "user.delegate", b"1")
    cgroup(service / "main")

    assert _bases([v2(tmp_path)], {"": "/warmpool.service/main"}) == (2, (service,))


def test_hybrid_machines_use_the_v1_memory_and_pids_hierarchies(tmp_path: Path) -> None:
    cgroup(tmp_path / "unified")
    memory = tmp_path / "memory" / "sessions" / "a"
    memory.mkdir(parents=True)
    mounts = [
        v2(tmp_path / "unified"),
        v1(tmp_path / "memory", "memory"),
        v1(tmp_path / "pids", "pids"),
    ]
    memberships = {"": "/", "memory": "/sessions/a", "pids": "/"}

    assert _bases(mounts, memberships) == (1, (memory, tmp_path / "pids"))


def test_v1_controllers_mounted_together_share_one_folder(tmp_path: Path) -> None:
    mounts = [v1(tmp_path / "both", "memory", "pids", root="/machine")]
    memberships = {"memory": "/machine/a", "pids": "/machine/a"}

    assert _bases(mounts, memberships) == (1, (tmp_path / "both" / "a",))


def test_without_either_the_reason_names_both(tmp_path: Path) -> None:
    # A parent that hands the controllers down, but was not delegated: not warmpool's to use.
    cgroup(tmp_path / "system.slice", "memory pids")
    cgroup(tmp_path / "system.slice" / "warmpool.service")

    with pytest.raises(CgroupsUnavailable) as raised:
        _bases([v2(tmp_path)], {"": "/system.slice/warmpool.service"})

    assert str(raised.value) == (
        f"cgroup v2 ({tmp_path}): {tmp_path}/system.slice/warmpool.service hands no memory and "
        "pids controllers to the cgroups below it; no cgroup v1 memory hierarchy is mounted"
    )
