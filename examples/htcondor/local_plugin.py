#!/usr/bin/env python3
"""An HTCondor file-transfer plug-in for local:// URLs, a stand-in for the
plug-in of a real checkpoint storage (examples/htcondor/self-destination.sub).

local:///DIR/REST is the file /DIR/REST on the machine the plug-in runs on:
an upload copies a sandbox file there, a download copies it back. The
directory must be reachable by the job's account on every execute node (a
shared file system, or one machine, as in the tests).

HTCondor's plug-in protocol (the manual's "file transfer plug-ins"):

    local_plugin.py -classad                  what the plug-in handles
    local_plugin.py -infile IN -outfile OUT [-upload]

IN holds one ClassAd per file, each with `Url` and `LocalFileName`; the
plug-in writes one result ad per file to OUT and exits 0 when every file
was transferred, 1 otherwise. Written for python3 alone: no `classad`
module, which not every pool installs.
"""

import os
import re
import shutil
import sys
import time

SCHEME = "local"


def literal(value):
    """A Python value as a ClassAd literal."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    text = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"'


def write_ad(out, attrs):
    out.write("[\n")
    for name, value in attrs.items():
        out.write(f"  {name} = {literal(value)};\n")
    out.write("]\n")


# An attribute with a string value, or the end of an ad: "]" in the new
# syntax, an empty line in the old one.
TOKEN = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"|\]|\n\s*\n')


def requests(text):
    """The (Url, LocalFileName) pairs of the ads in `text`, in order. HTCondor
    writes them in the new syntax ([ Name = "value"; ... ]); the old one
    (Name = "value" lines, an empty line between ads) is read too."""
    attrs = {}
    for m in TOKEN.finditer(text + "\n\n"):
        if m.group(1):
            attrs[m.group(1).lower()] = re.sub(r"\\(.)", r"\1", m.group(2))
        elif "url" in attrs:
            yield attrs["url"], attrs.get("localfilename", "")
            attrs = {}


def path_of(url):
    prefix = SCHEME + "://"
    if not url.startswith(prefix):
        raise ValueError(f"not a {prefix} URL: {url}")
    path = url[len(prefix):]
    if not path.startswith("/"):
        raise ValueError(f"not {prefix}/ABSOLUTE/PATH: {url}")
    return path


def transfer(url, local, upload):
    """Copies one file; returns its size. An upload is written beside its
    name and renamed over it, so that a reader never sees half a file."""
    remote = path_of(url)
    src, dst = (local, remote) if upload else (remote, local)
    os.makedirs(os.path.dirname(dst) or ".", exist_ok=True)
    part = f"{dst}.part{os.getpid()}"
    try:
        shutil.copyfile(src, part)
        os.replace(part, dst)
    finally:
        if os.path.exists(part):
            os.unlink(part)
    return os.path.getsize(dst)


def main(args):
    if args == ["-classad"]:
        print('MultipleFileSupport = true')
        print('PluginType = "FileTransfer"')
        print(f'SupportedMethods = "{SCHEME}"')
        print('PluginVersion = "1.0.0"')
        print('Version = "1.0.0"')
        return 0
    upload = "-upload" in args
    args = [a for a in args if a != "-upload"]
    try:
        infile = args[args.index("-infile") + 1]
        outfile = args[args.index("-outfile") + 1]
    except (ValueError, IndexError):
        sys.stderr.write(
            "usage: local_plugin.py -classad | -infile IN -outfile OUT [-upload]\n"
        )
        return 1
    with open(infile) as f:
        wanted = list(requests(f.read()))
    status = 0
    with open(outfile, "w") as out:
        for url, local in wanted:
            start = time.time()
            try:
                size = transfer(url, local, upload)
            except Exception as e:
                write_ad(out, {
                    "TransferSuccess": False,
                    "TransferError": f"{type(e).__name__}: {e}",
                    "TransferUrl": url,
                })
                status = 1
                continue
            end = time.time()
            write_ad(out, {
                "TransferSuccess": True,
                "TransferProtocol": SCHEME,
                "TransferType": "upload" if upload else "download",
                "TransferFileName": local,
                "TransferFileBytes": size,
                "TransferTotalBytes": size,
                "TransferStartTime": int(start),
                "TransferEndTime": int(end),
                "ConnectionTimeSeconds": end - start,
                "TransferUrl": url,
            })
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
