"""A loopback stand-in for the Hugging Face Hub, serving just what ``huggingface_hub`` calls to create a repo
and a branch and to upload a folder without Xet (``HF_HUB_DISABLE_XET=1``): ``POST /api/repos/create``,
``POST /api/models/<repo>/branch/<name>``, ``POST /api/models/<repo>/preupload/<rev>``, the LFS batch
``POST /<repo>.git/info/lfs/objects/batch`` with its ``PUT`` uploads, ``POST /api/models/<repo>/commit/<rev>``
(the ndjson commit), ``POST /api/validate-yaml`` (a README's metadata, checked before the commit); and, to read
a file back, ``HEAD``/``GET /<repo>/resolve/<rev>/<path>``.

It binds 127.0.0.1 only, answers at most ``max_requests`` requests and stops by itself after ``lifetime``
seconds (or when its ``with`` block ends). ``repos[repo_id]["branches"][rev]`` holds each branch's files
(path -> bytes); ``commits`` every commit's summary and paths; ``log`` each request's method and path.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlparse

USER = "tester"
LFS_SUFFIXES = (".safetensors", ".bin", ".pt", ".png", ".pth")


class FakeHub:
    def __init__(self, *, max_requests: int = 400, lifetime: float = 300.0, fail_commits: bool = False):
        self.repos: dict[str, dict[str, Any]] = {}
        self.lfs: dict[str, bytes] = {}
        self.commits: list[dict[str, Any]] = []
        self.log: list[tuple[str, str]] = []
        self.tokens: set[str] = set()
        self.max_requests = max_requests
        self.lifetime = lifetime
        self.fail_commits = fail_commits
        self.lock = threading.Lock()
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                hub.handle(self, "GET")

            def do_HEAD(self) -> None:
                hub.handle(self, "HEAD")

            def do_POST(self) -> None:
                hub.handle(self, "POST")

            def do_PUT(self) -> None:
                hub.handle(self, "PUT")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
        self._timer = threading.Timer(lifetime, self.stop)
        self._timer.daemon = True

    # ------------------------------------------------------------------ lifecycle ----
    def __enter__(self) -> FakeHub:
        self._thread.start()
        self._timer.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def stop(self) -> None:
        self._timer.cancel()
        self.server.shutdown()
        self.server.server_close()

    def files(self, repo_id: str, revision: str = "main") -> dict[str, bytes]:
        return self.repos[repo_id]["branches"][revision]

    # ------------------------------------------------------------------ requests ----
    def handle(self, req: BaseHTTPRequestHandler, method: str) -> None:
        path = unquote(urlparse(req.path).path)
        length = int(req.headers.get("Content-Length") or 0)
        body = req.rfile.read(length) if length else b""
        with self.lock:
            self.log.append((method, path))
            self.tokens.add(req.headers.get("Authorization", ""))
            if len(self.log) > self.max_requests:
                return self.send(req, 503, {"error": "request budget spent"})
            try:
                status, payload, headers = self.route(method, path, body)
            except KeyError as exc:
                status, payload, headers = 404, {"error": f"not found: {exc}"}, {}
        self.send(req, status, payload, headers, head=method == "HEAD")

    def send(self, req: BaseHTTPRequestHandler, status: int, payload: Any, headers: dict[str, str] | None = None,
             head: bool = False) -> None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        req.send_response(status)
        req.send_header("Content-Length", str(len(data)))
        if not isinstance(payload, bytes):
            req.send_header("Content-Type", "application/json")
        for key, value in (headers or {}).items():
            req.send_header(key, value)
        if status >= 400:
            req.send_header("X-Error-Message", str(payload.get("error", "")) if isinstance(payload, dict) else "")
        req.end_headers()
        if not head:
            req.wfile.write(data)

    def route(self, method: str, path: str, body: bytes) -> tuple[int, Any, dict[str, str]]:
        parts = path.strip("/").split("/")
        if method == "POST" and path == "/api/repos/create":
            args = json.loads(body)
            repo_id = f"{args.get('organization') or USER}/{args['name']}"
            url = {"url": f"{self.url}/{repo_id}", "name": repo_id}
            if repo_id in self.repos:
                return 409, {"error": "You already created this model repo", **url}, {}
            self.repos[repo_id] = {"private": args.get("visibility") == "private" or args.get("private"),
                                   "branches": {"main": {}}}
            return 200, url, {}
        if method == "POST" and path == "/api/validate-yaml":  # a README.md's metadata, before a commit with it
            return self.validate_yaml(json.loads(body)["content"])
        if method == "POST" and parts[:2] == ["api", "models"] and len(parts) >= 6:
            repo_id, action, rev = "/".join(parts[2:4]), parts[4], "/".join(parts[5:])
            repo = self.repos[repo_id]
            if action == "branch":
                repo["branches"].setdefault(rev, dict(repo["branches"]["main"]))
                return 200, {}, {}
            if action == "preupload":
                files = json.loads(body)["files"]
                return 200, {"files": [{"path": f["path"], "uploadMode": self.mode(f), "shouldIgnore": False}
                                       for f in files], "commitOid": "0" * 40}, {}
            if action == "commit":
                return self.commit(repo, repo_id, rev, body)
        if method == "POST" and path.endswith(".git/info/lfs/objects/batch"):
            repo_id = path.strip("/").removesuffix(".git/info/lfs/objects/batch")
            self.repos[repo_id]  # noqa: B018 (404 for an unknown repo)
            objects = []
            for obj in json.loads(body)["objects"]:
                entry = {"oid": obj["oid"], "size": obj["size"], "authenticated": True}
                if obj["oid"] not in self.lfs:
                    entry["actions"] = {"upload": {"href": f"{self.url}/lfs-upload/{obj['oid']}"}}
                objects.append(entry)
            return 200, {"transfer": "basic", "objects": objects}, {"Content-Type": "application/vnd.git-lfs+json"}
        if method == "PUT" and parts[0] == "lfs-upload":
            oid = parts[1]
            if hashlib.sha256(body).hexdigest() != oid:
                return 400, {"error": "sha256 mismatch"}, {}
            self.lfs[oid] = body
            return 200, {}, {}
        if method in ("GET", "HEAD") and len(parts) >= 5 and parts[2] == "resolve":
            repo_id, rev, file = "/".join(parts[:2]), parts[3], "/".join(parts[4:])
            data = self.repos[repo_id]["branches"][rev][file]
            sha = hashlib.sha1(data).hexdigest()
            return 200, data, {"ETag": f'"{sha}"', "X-Repo-Commit": "1" * 40, "Content-Type": "text/plain"}
        return 404, {"error": f"no route for {method} {path}"}, {}

    @staticmethod
    def validate_yaml(content: str) -> tuple[int, Any, dict[str, str]]:
        """The card's YAML header must parse to a mapping (the Hub's own check goes further)."""
        import yaml

        if not content.startswith("---\n") or "\n---" not in content[4:]:
            return 200, {"warnings": [{"message": "empty or missing yaml metadata"}]}, {}
        try:
            meta = yaml.safe_load(content[4:content.index("\n---", 4)])
        except yaml.YAMLError as exc:
            return 400, {"errors": [{"message": str(exc)}]}, {}
        if not isinstance(meta, dict):
            return 400, {"errors": [{"message": "metadata is not a mapping"}]}, {}
        return 200, {"warnings": []}, {}

    @staticmethod
    def mode(file: dict[str, Any]) -> str:
        sample = base64.b64decode(file["sample"])
        return "lfs" if file["path"].endswith(LFS_SUFFIXES) or b"\0" in sample else "regular"

    def commit(self, repo: dict[str, Any], repo_id: str, rev: str, body: bytes) -> tuple[int, Any, dict[str, str]]:
        if self.fail_commits:
            return 500, {"error": "commits are failing"}, {}
        lines = [json.loads(line) for line in body.splitlines() if line.strip()]
        header = next(line["value"] for line in lines if line["key"] == "header")
        files = repo["branches"][rev]
        paths = []
        for line in lines:
            value = line["value"]
            if line["key"] == "file":
                files[value["path"]] = base64.b64decode(value["content"])
            elif line["key"] == "lfsFile":
                files[value["path"]] = self.lfs[value["oid"]]
            elif line["key"] == "deletedFile":
                files.pop(value["path"], None)
            else:
                continue
            paths.append(value["path"])
        oid = hashlib.sha1(f"{len(self.commits)}{time.time()}".encode()).hexdigest()
        self.commits.append({"repo": repo_id, "revision": rev, "summary": header["summary"], "paths": paths})
        return 200, {"commitUrl": f"{self.url}/{repo_id}/commit/{oid}", "commitOid": oid,
                     "pullRequestUrl": None}, {}
