"""``grpo sandbox probe|run|serve``: check the layers, run one program, serve the sandbox over HTTP.

A plugin of its own (entry point ``builtin_sandbox_cli``) adding ``grpo sandbox`` through the
``grpo_register_commands`` hook, as any third party does; heavy imports stay inside the commands."""

from __future__ import annotations

import argparse
import contextlib
import sys
from typing import Any

from grpo_rewards.cli_args import positive
from grpo_rewards.errors import UserError
from grpo_rewards.files import read_text
from grpo_rewards.hookspecs import hookimpl
from grpo_rewards.sandbox import languages


@hookimpl
def grpo_register_commands(subparsers: Any) -> None:
    sandbox = subparsers.add_parser("sandbox", help="run programs in the local sandbox; serve it over HTTP")
    sub = sandbox.add_subparsers(dest="sandbox_command", metavar="SUBCOMMAND", required=True)

    p = sub.add_parser("probe", help="print the isolation layers this machine offers and the active profile")
    p.set_defaults(func=cmd_probe)

    p = sub.add_parser("run", help="run one program and print its status, output and the active layers")
    p.add_argument("file", help="a program (Python, or C/C++ by its .c/.cpp/.cc/.cxx suffix or --language)")
    p.add_argument("--stdin", help="a file given to the program as standard input")
    p.add_argument("--language", choices=[lang.name for lang in languages.local_languages()],
                   help="default: from the file's suffix")
    _limit_args(p)
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("serve", help="serve the local sandbox with SandboxFusion's /run_code and Piston's API")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback only)")
    p.add_argument("--port", type=int, default=8080)
    p.add_argument("--slots", type=int, default=0, help="parallel programs (default: two per core)")
    p.add_argument("--token-env", default="", help="name of an environment variable holding a bearer token")
    _limit_args(p)
    p.set_defaults(func=cmd_serve)


def _limit_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cpu-seconds", type=positive(float), default=5.0)
    p.add_argument("--wall-seconds", type=positive(float), default=10.0)
    p.add_argument("--memory-mb", type=positive(int), default=1024)
    p.add_argument("--output-kb", type=positive(int), default=1024)
    p.add_argument("--profile", default="auto", choices=("auto", "default", "hardened", "strict"),
                   help="isolation profile (default: auto, the strongest here); a named one is never weakened")
    p.add_argument("--allow-unsafe-execution", action="store_true",
                   help="run even when the kernel lacks layers of the default profile (trusted code only)")
    p.add_argument("--package", action="append", default=[], metavar="NAME",
                   help="a package programs may import beside the standard library (repeatable; default: none)")


def _limits(args: argparse.Namespace) -> Any:
    # every `grpo` call loads this plugin: the sandbox's modules load when a sandbox command runs
    from grpo_rewards.sandbox.program import Limits

    return Limits(cpu_seconds=args.cpu_seconds, wall_seconds=args.wall_seconds, memory_mb=args.memory_mb,
                  output_bytes=args.output_kb * 1024)


def cmd_probe(args: argparse.Namespace) -> int:
    # every `grpo` call loads this plugin: the sandbox's modules load when a sandbox command runs
    from grpo_rewards.sandbox.probe import probe

    found = probe()
    print(f"profile: {found.profile}")
    print(f"layers: {', '.join(found.layers)}")
    print(f"landlock ABI: {found.landlock_abi}")
    for note in found.notes:
        print(f"note: {note}")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    # every `grpo` call loads this plugin: the sandbox's modules load when a sandbox command runs
    from grpo_rewards.sandbox.packages import PackageError
    from grpo_rewards.sandbox.pool import LocalSandbox
    from grpo_rewards.sandbox.probe import SandboxStartError, UnsafeSandboxError
    from grpo_rewards.sandbox.program import Program

    code = read_text(args.file, UserError)  # missing, a folder, binary, not UTF-8: one line, exit 2
    stdin = read_text(args.stdin, UserError, key="--stdin") if args.stdin else ""
    by_suffix = languages.by_suffix(Path(args.file).suffix)
    language = args.language or (by_suffix.name if by_suffix and by_suffix.local else "python")
    try:
        box = LocalSandbox(slots=1, limits=_limits(args), allow_unsafe=args.allow_unsafe_execution,
                           profile=args.profile, packages=args.package)
    except (UnsafeSandboxError, SandboxStartError, PackageError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    with box:
        result = box.run_one(Program(code, stdin, language))
        if args.json:
            print(json.dumps({"status": result.status, "exit_code": result.exit_code, "signal": result.signal,
                              "wall": result.wall, "cpu": result.cpu, "error": result.error, "stdout": result.stdout,
                              "stderr": result.stderr, "profile": box.profile, "layers": box.layers}))
        else:
            print(f"status: {result.status}" + (f" ({result.error})" if result.error else ""))
            print(f"wall: {result.wall:.3f}s  cpu: {result.cpu:.3f}s  exit code: {result.exit_code}"
                  + (f"  signal: {result.signal}" if result.signal else ""))
            print(f"profile: {box.profile}\nlayers: {', '.join(box.layers)}")
            print("--- stdout ---")
            sys.stdout.write(result.stdout if result.stdout.endswith("\n") or not result.stdout else result.stdout + "\n")
            print("--- stderr ---")
            sys.stdout.write(result.stderr if result.stderr.endswith("\n") or not result.stderr else result.stderr + "\n")
    return 0 if result.status == "ok" else 1


def cmd_serve(args: argparse.Namespace) -> int:
    import os
    import signal
    import threading

    # every `grpo` call loads this plugin: the sandbox's modules load when a sandbox command runs
    from grpo_rewards.sandbox.packages import PackageError
    from grpo_rewards.sandbox.pool import LocalSandbox
    from grpo_rewards.sandbox.probe import SandboxStartError, UnsafeSandboxError
    from grpo_rewards.sandbox.server import serve

    token = os.environ.get(args.token_env, "") if args.token_env else ""
    if args.token_env and not token:
        print(f"error: environment variable {args.token_env} is empty or unset", file=sys.stderr)
        return 2
    try:
        box = LocalSandbox(slots=args.slots or None, limits=_limits(args), allow_unsafe=args.allow_unsafe_execution,
                           profile=args.profile, packages=args.package)
    except (UnsafeSandboxError, SandboxStartError, PackageError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    with box:
        server = serve(box, args.host, args.port, token=token)
        host, port = server.server_address[:2]
        print(f"sandbox serving on http://{host}:{port} (POST /run_code, POST /api/v2/execute); "
              f"profile={box.profile} layers={','.join(box.layers)} slots={box.slots}", flush=True)
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        with contextlib.suppress(KeyboardInterrupt):
            stop.wait()
        server.shutdown()
    return 0
