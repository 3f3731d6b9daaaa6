"""notes-python: a small notes web app on the SlessService kind (WSGI).

GET /notes lists the notes, POST /notes adds one ({"text": "..."}),
GET /notes/<id> reads one, DELETE /notes/<id> removes it.

Storage: PostgreSQL when DATABASE_URL is a postgres:// URL (from a Secret
through secretKeyRef) and the psycopg package is installed; otherwise the
standard library's sqlite3 in NOTES_DB (default: a file in /tmp), which
keeps notes per instance only.
"""

import json
import os
import sqlite3
import threading


class Store:
    def __init__(self):
        url = os.environ.get("DATABASE_URL", "")
        self.lock = threading.Lock()
        if url.startswith(("postgres://", "postgresql://")):
            import psycopg  # noqa: only where the image installed it

            self.conn = psycopg.connect(url, autocommit=True)
            self.mark = "%s"
            self.conn.execute("CREATE TABLE IF NOT EXISTS notes (id SERIAL PRIMARY KEY, text TEXT NOT NULL)")
        else:
            self.conn = sqlite3.connect(os.environ.get("NOTES_DB", "/tmp/notes.db"), check_same_thread=False,
                                        isolation_level=None)
            self.mark = "?"
            self.conn.execute("CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY AUTOINCREMENT, text TEXT NOT NULL)")

    def run(self, sql, args=()):
        with self.lock:
            cur = self.conn.execute(sql.replace("?", self.mark), args)
            return cur.fetchall() if cur.description else []


store = None


def reply(start_response, status, value):
    body = json.dumps(value).encode()
    start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]


def app(environ, start_response):
    global store
    if store is None:
        store = Store()
    method, path = environ["REQUEST_METHOD"], environ["PATH_INFO"].rstrip("/")
    if path == "/notes" and method == "GET":
        rows = store.run("SELECT id, text FROM notes ORDER BY id")
        return reply(start_response, "200 OK", {"notes": [{"id": i, "text": t} for i, t in rows]})
    if path == "/notes" and method == "POST":
        size = int(environ.get("CONTENT_LENGTH") or 0)
        try:
            text = json.loads(environ["wsgi.input"].read(size) or b"{}").get("text", "")
        except (ValueError, AttributeError):
            text = ""
        if not isinstance(text, str) or not text.strip():
            return reply(start_response, "400 Bad Request", {"error": 'send {"text": "..."}'})
        rows = store.run("INSERT INTO notes (text) VALUES (?) RETURNING id", (text,))
        return reply(start_response, "201 Created", {"id": rows[0][0], "text": text})
    if path.startswith("/notes/"):
        try:
            note_id = int(path[len("/notes/"):])
        except ValueError:
            return reply(start_response, "404 Not Found", {"error": "no such note"})
        if method == "GET":
            rows = store.run("SELECT id, text FROM notes WHERE id = ?", (note_id,))
            if rows:
                return reply(start_response, "200 OK", {"id": rows[0][0], "text": rows[0][1]})
            return reply(start_response, "404 Not Found", {"error": "no such note"})
        if method == "DELETE":
            gone = store.run("DELETE FROM notes WHERE id = ? RETURNING id", (note_id,))
            return reply(start_response, "204 No Content" if gone else "404 Not Found", {} if gone else {"error": "no such note"})
    return reply(start_response, "404 Not Found", {"error": "no route for %s %s" % (method, path or "/")})
