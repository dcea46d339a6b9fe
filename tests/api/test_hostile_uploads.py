"""A multipart upload that is cut short, nested, oversized or mis-encoded is a JSON 4xx naming what to fix, and writes nothing."""

from __future__ import annotations

import json

import pytest

from .test_errors import assert_error_body

BOUNDARY = "XyZ"
FORM = f"multipart/form-data; boundary={BOUNDARY}"
A_FILE = (['Content-Disposition: form-data; name="file"; filename="a.txt"'], b"Ada met Grace.")


def form(*parts: tuple[list[str], bytes]) -> bytes:
    """A multipart/form-data body of ``(part headers, content)`` parts, closed by its final boundary."""
    out = b""
    for headers, content in parts:
        out += f"--{BOUNDARY}\r\n".encode() + b"".join(h.encode("latin-1") + b"\r\n" for h in headers) + b"\r\n" + content + b"\r\n"
    return out + f"--{BOUNDARY}--\r\n".encode()


def field(name: str, content: bytes, *headers: str) -> tuple[list[str], bytes]:
    return [f'Content-Disposition: form-data; name="{name}"', *headers], content


#: (what the client sent wrong, Content-Type, body, status, code, field); each one was a 500 (most after reading the whole body).
MALFORMED = [
    ("a body that never reaches its boundary", FORM, b"garbage without a boundary", 400, "malformed_multipart", "body"),
    ("a body cut short inside a part", FORM, f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\n\r\nhello'.encode(), 400, "malformed_multipart", "body"),
    ("a field in a charset no codec knows", FORM, form(field("collection", b"c", "Content-Type: text/plain; charset=bogus"), A_FILE), 422, "invalid", "collection"),
    ("a field whose bytes are not UTF-8", FORM, form(field("collection", b"\xff\xfe"), A_FILE), 422, "invalid", "collection"),
    ("a field in base64 cut short", FORM, form(field("lang", b"ZW4", "Content-Transfer-Encoding: base64"), A_FILE), 422, "invalid", "lang"),
    ("a field in an unknown transfer encoding", FORM, form(field("lang", b"en", "Content-Transfer-Encoding: x-bogus"), A_FILE), 422, "invalid", "lang"),
    ("a part that is itself multipart", FORM, form((['Content-Disposition: form-data; name="file"; filename="a.txt"', "Content-Type: multipart/mixed; boundary=in"], b"--in\r\n\r\nx\r\n--in--\r\n")), 422, "invalid", "file"),
    ("a file name whose bytes are not UTF-8", FORM, form((['Content-Disposition: form-data; name="file"; filename="a\xff.txt"'], b"Ada met Grace.")), 422, "invalid", "file"),
    # Decoded with replacement characters, "%FF.md" and "%FE.md" were one document, the second replacing the first.
    ("a percent-encoded file name whose bytes are not UTF-8", FORM, form((['Content-Disposition: form-data; name="file"; filename="%FF.md"'], b"Ada met Grace.")), 422, "invalid", "file"),
    # The JSON form of the import, as strict as every other JSON body.
    ("JSON nested past the decoder's depth", "application/json", b"[" * 5000, 400, "malformed_json", "body"),
    ("a document nested past the decoder's depth", "application/json", b'{"documents": ' + b"[" * 5000, 400, "malformed_json", "body"),
    ("JSON sent as text/plain", "text/plain", b'{"filename": "a.txt", "content": "Ada met Grace."}', 415, "unsupported_media_type", "Content-Type"),
    ("JSON sent as a urlencoded form", "application/x-www-form-urlencoded", b'{"filename": "a.txt", "content": "Ada met Grace."}', 415, "unsupported_media_type", "Content-Type"),
]


@pytest.mark.parametrize("what, content_type, body, status, code, named", MALFORMED, ids=[m[0] for m in MALFORMED])
async def test_a_malformed_upload_is_a_4xx_naming_the_field_and_writes_nothing(api, what, content_type, body, status, code, named):
    head = api.service.store.last_position()
    response = await api.raw.post("/v1/import/documents", data=body, headers={"Content-Type": content_type})
    text = await response.text()
    assert response.status == status, (what, text)
    assert response.content_type == "application/json", text
    answer = json.loads(text)
    assert_error_body(answer, status)
    assert (answer["error"]["code"], answer["error"]["field"]) == (code, named), answer
    assert api.service.store.last_position() == head, f"{what}: the refused upload wrote to the log"


async def test_a_well_formed_upload_beside_them_is_imported(api):
    """The same forms, well formed, are taken: the refusals above are about what was wrong, not about the form."""
    body = form(field("collection", b"kb", "Content-Type: text/plain; charset=utf-8"), field("lang", b"ZW4=", "Content-Transfer-Encoding: base64"), A_FILE)
    response = await api.raw.post("/v1/import/documents", data=body, headers={"Content-Type": FORM})
    assert response.status == 200, await response.text()
    report = await response.json()
    assert report["documents"] == 1 and report["results"][0]["filename"] == "a.txt"


async def test_a_file_in_a_transfer_encoding_is_imported_decoded_and_a_bad_one_reported(api):
    """A file part in base64 or quoted-printable was stored as sent: the document was the encoded text."""
    encoded = (['Content-Disposition: form-data; name="file"; filename="b64.txt"', "Content-Transfer-Encoding: base64"], b"QWRhIG1ldCBHcmFjZSBpbiBMb25kb24u")
    quoted = (['Content-Disposition: form-data; name="file"; filename="qp.txt"', "Content-Transfer-Encoding: quoted-printable"], b"Caf=C3=A9 au lait with Grace.")
    broken = (['Content-Disposition: form-data; name="file"; filename="bad.txt"', "Content-Transfer-Encoding: base64"], b"QWR")
    response = await api.raw.post("/v1/import/documents", data=form(encoded, quoted, broken), headers={"Content-Type": FORM})
    assert response.status == 200, await response.text()
    results = {r["filename"]: r for r in (await response.json())["results"]}
    assert results["b64.txt"]["status"] == results["qp.txt"]["status"] == "imported"
    assert (results["bad.txt"]["status"], results["bad.txt"]["reason"]) == ("failed", "corrupt") and "Content-Transfer-Encoding" in results["bad.txt"]["error"]
    found = await (await api.raw.post("/v1/recall", json={"query": "Grace", "channels": ["lexical"]})).json()
    assert sorted(hit["memory"]["memory"] for hit in found["hits"]) == ["Ada met Grace in London.", "Café au lait with Grace."]


@pytest.mark.parametrize("name, status", [
    ("..", "refused"),  # a 500 once (the upload was written to the temporary folder's parent); a '..' part names no file
    ("notes/..", "refused"),
    ("x/" + "é" * 200 + ".md", "imported"),  # 255 characters, 403 bytes: too long a name for the file system
])
async def test_any_file_name_is_imported_or_reported(api, name, status):
    """Each was a 500: the upload was written to a temporary file of its own name before it was read."""
    response = await api.raw.post("/v1/import/documents", json={"documents": [{"filename": name, "content": "Ada met Grace."}]})
    if status == "refused":
        assert response.status == 422 and (await response.json())["error"]["field"] == "documents[0].filename"
        return
    assert response.status == 200, await response.text()
    [result] = (await response.json())["results"]
    assert result["status"] == status, result
    if status == "failed":
        assert result["reason"] == "unsupported", result


#: (what, Content-Type, body, field): a title or a metadata value that every chunk of the document would carry, too long
#: for that: a title of 100,000 characters on a document of 100 chunks wrote 10 MB to the log.
OVERLONG_FIELDS = [
    ("a title", "application/json", json.dumps({"filename": "a.txt", "content": "Ada met Grace.", "title": "T" * 1001}).encode(), "title"),
    ("a document's title in a batch", "application/json", json.dumps({"documents": [{"filename": "a.txt", "content": "Ada.", "title": "T" * 1001}]}).encode(), "documents[0].title"),
    ("a collection for every document", "application/json", json.dumps({"collection": "c" * 201, "documents": [{"filename": "a.txt", "content": "Ada."}]}).encode(), "collection"),
    ("a source URL", "application/json", json.dumps({"filename": "a.txt", "content": "Ada.", "source_url": "https://e.org/" + "u" * 2000}).encode(), "source_url"),
    ("a form's collection", FORM, form(field("collection", b"c" * 201), A_FILE), "collection"),
    ("a form's model", FORM, form(field("model", b"m" * 201), A_FILE), "model"),
]


@pytest.mark.parametrize("what, content_type, body, named", OVERLONG_FIELDS, ids=[m[0] for m in OVERLONG_FIELDS])
async def test_a_title_or_metadata_every_chunk_would_carry_is_refused_past_its_length_and_writes_nothing(api, what, content_type, body, named):
    head = api.service.store.last_position()
    response = await api.raw.post("/v1/import/documents", data=body, headers={"Content-Type": content_type})
    answer = json.loads(await response.text())
    assert response.status == 422, (what, answer)
    assert_error_body(answer, 422)
    assert answer["error"]["field"] == named, answer
    assert api.service.store.last_position() == head


async def test_a_file_of_more_chunks_than_a_document_may_have_is_reported_failed_and_the_others_imported(api):
    """A small file of many headings was 20,000 memories (200,000 for 3 MB) in one batch, holding the writer for minutes."""
    from mnemolog.projections.ingest.documents import MAX_CHUNKS

    many = (['Content-Disposition: form-data; name="file"; filename="many.md"'], b"# h\nb\n" * (MAX_CHUNKS + 1))
    response = await api.raw.post("/v1/import/documents", data=form(many, A_FILE), headers={"Content-Type": FORM})
    assert response.status == 200, await response.text()
    results = {r["filename"]: r for r in (await response.json())["results"]}
    assert (results["many.md"]["status"], results["many.md"]["reason"]) == ("failed", "too-large")
    assert results["a.txt"]["status"] == "imported"
