#!/usr/bin/env python3
"""An MCP server built on the official Python SDK (`mcp` 1.x, FastMCP), for the tests that check
Herald against the protocol as real servers speak it. Over stdio, or over streamable HTTP
(`--http PORT`, 0 picks one and prints it) where a session id this process did not issue is
answered like server-everything does: HTTP 400 with a JSON-RPC error that has no `id`.

Tools: echo; note_write (destructiveHint, appends to --state); note_read (readOnlyHint);
research (listed with execution.taskSupport = "required"); grow (adds the tool `fresh` and sends
notifications/tools/list_changed); picture (a text part and a PNG image part); link (a resource
link to memo://welcome, a readable resource); long (reports progress and logs every 0.3 s);
confirm (asks the person through elicitation and says what came back). The server sends
`instructions`. --json-response: over HTTP, answer each request with one JSON body instead of
an SSE stream. --pidfile FILE: write the pid. --wrap: start the real server
as a child sharing stdio and wait for it (like npx), writing its own pid to FILE.wrapper.
"""
import argparse
import base64
import json
import os
import socket
import subprocess
import sys

# A 1x1 red PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==")
INSTRUCTIONS = "Memo board: read notes with note_read before writing; keep each note under 80 characters."

ap = argparse.ArgumentParser()
ap.add_argument("--http", type=int)
ap.add_argument("--state")
ap.add_argument("--pidfile")
ap.add_argument("--wrap", action="store_true")
ap.add_argument("--json-response", action="store_true")
ap.add_argument("--instructions", default=INSTRUCTIONS)
args = ap.parse_args()

if args.wrap:
    with open(args.pidfile + ".wrapper", "w") as f:
        f.write(str(os.getpid()))
    argv = [a for a in sys.argv if a != "--wrap"]
    sys.exit(subprocess.call([sys.executable] + argv))

if args.pidfile:
    with open(args.pidfile, "w") as f:
        f.write(str(os.getpid()))

# The SDK is imported only now: a wrapper that imported it too would double the start-up time.
import anyio
from pydantic import BaseModel
from mcp.server.fastmcp import Context, FastMCP
from mcp.types import (ImageContent, ResourceLink, TextContent, ToolAnnotations,
                       ToolExecution)



class Server(FastMCP):
    async def list_tools(self):
        tools = await super().list_tools()
        for t in tools:
            if t.name == "research":
                t.execution = ToolExecution(taskSupport="required")
        return tools


mcp = Server("memo", instructions=args.instructions, log_level="WARNING",
             json_response=args.json_response)


@mcp.tool(description="Echoes the text.")
def echo(text: str) -> str:
    return text


@mcp.tool(description="Writes a note.", annotations=ToolAnnotations(destructiveHint=True))
def note_write(text: str) -> str:
    if args.state:
        with open(args.state, "a") as f:
            f.write(text + "\n")
    return "noted: " + text


@mcp.tool(description="Reads the notes.", annotations=ToolAnnotations(readOnlyHint=True))
def note_read() -> str:
    if args.state and os.path.exists(args.state):
        return open(args.state).read()
    return "(no notes)"


@mcp.tool(description="Researches a question at length (runs as a task).")
def research(question: str) -> str:
    return "researched " + question


@mcp.tool(description="Adds the tool `fresh` to this server.")
async def grow(ctx: Context) -> str:
    def fresh() -> str:
        return "fresh from the server"
    mcp.add_tool(fresh, name="fresh", description="A tool added at runtime.")
    await ctx.session.send_tool_list_changed()
    return "grown"


@mcp.tool(description="Draws a picture.")
def picture() -> list:
    return [TextContent(type="text", text="a red dot"),
            ImageContent(type="image", data=base64.b64encode(PNG).decode(), mimeType="image/png")]


@mcp.tool(description="Links to the welcome memo.")
def link() -> list:
    return [ResourceLink(type="resource_link", uri="memo://welcome", name="welcome",
                         mimeType="text/plain")]


@mcp.resource("memo://welcome", mime_type="text/plain")
def welcome() -> str:
    return "Welcome to the memo board: A-1001 ships Friday."


@mcp.tool(description="Works for the given seconds, reporting progress.")
async def long(seconds: float, ctx: Context) -> str:
    steps = max(1, int(seconds / 0.3))
    for i in range(steps):
        await ctx.report_progress(i + 1, steps, "step %d" % (i + 1))
        await ctx.warning("memo step %d <of> %d\x1b[31m" % (i + 1, steps))
        await anyio.sleep(0.3)
    return "done after %d steps" % steps


class Confirmation(BaseModel):
    confirmed: bool


@mcp.tool(description="Asks the person to confirm the order before placing it.")
async def confirm(order: str, ctx: Context) -> str:
    answer = await ctx.elicit("Place order %s?" % order, Confirmation)
    if answer.action == "accept":
        return "confirmed: %s" % answer.data.confirmed
    return "the client answered %s; order %s not placed" % (answer.action, order)


class StaleSessions:
    """Answers a session id this process never issued with 400 and an id-less JSON-RPC error."""

    def __init__(self, app):
        self.app = app
        self.issued = set()

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers") or [])
        sid = headers.get(b"mcp-session-id")
        if sid is not None and sid not in self.issued:
            body = json.dumps({"jsonrpc": "2.0", "error": {
                "code": -32000, "message": "Bad Request: No valid session ID provided"}}).encode()
            await send({"type": "http.response.start", "status": 400,
                        "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": body})
            return

        async def watch(message):
            if message["type"] == "http.response.start":
                for k, v in message.get("headers", []):
                    if k.lower() == b"mcp-session-id":
                        self.issued.add(v)
            await send(message)
        await self.app(scope, receive, watch)


if args.http is None:
    mcp.run("stdio")
else:
    import uvicorn
    port = args.http
    if port == 0:
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
    print(port, flush=True)
    app = StaleSessions(mcp.streamable_http_app())
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
