"""API errors as the real server reports them: an HTTP code plus a ``Status`` object.

Clients branch on ``code`` and ``reason`` (the kubernetes Python client raises ApiException
with ``status``; client-go maps ``reason`` to IsNotFound/IsConflict ...), so the shapes and
messages follow the real apiserver's ``k8s.io/apimachinery/pkg/api/errors``.
"""

from __future__ import annotations

from typing import Any

_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Gone",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def default_reason(code: int) -> str:
    return _REASONS.get(code, "Unknown" if code < 500 else "InternalError")


class ApiError(Exception):
    """An error answer: ``code`` is the HTTP status, ``status()`` the JSON body."""

    def __init__(
        self,
        code: int,
        message: str,
        reason: str | None = None,
        details: dict[str, Any] | None = None,
        retry_after: int | None = None,
    ):
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason or default_reason(code)
        self.details = details
        self.retry_after = retry_after

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
        }
        if self.details is not None:
            body["details"] = self.details
        body["code"] = self.code
        return body


def _details(name: str, qualified: str, **extra: Any) -> dict[str, Any]:
    resource, _, grp = qualified.partition(".")
    out: dict[str, Any] = {"name": name}
    if grp:
        out["group"] = grp
    out["kind"] = resource
    out.update(extra)
    return out


def not_found(qualified: str, name: str) -> ApiError:
    return ApiError(404, f'{qualified} "{name}" not found', "NotFound", _details(name, qualified))


def already_exists(qualified: str, name: str) -> ApiError:
    return ApiError(409, f'{qualified} "{name}" already exists', "AlreadyExists", _details(name, qualified))


def conflict(qualified: str, name: str, why: str) -> ApiError:
    return ApiError(
        409, f'Operation cannot be fulfilled on {qualified} "{name}": {why}', "Conflict", _details(name, qualified)
    )


STALE = "the object has been modified; please apply your changes to the latest version and try again"


def invalid(kind: str, name: str, causes: list[tuple[str, str, str]], group: str = "") -> ApiError:
    """422 Invalid; ``causes`` are (field, reason, message) like field.ErrorList."""
    text = (
        "; ".join(f"{f}: {m}" for f, _, m in causes)
        if len(causes) == 1
        else "[" + ", ".join(f"{f}: {m}" for f, _, m in causes) + "]"
    )
    details: dict[str, Any] = {"name": name}
    if group:
        details["group"] = group
    details["kind"] = kind
    details["causes"] = [{"reason": r, "message": m, "field": f} for f, r, m in causes]
    return ApiError(422, f'{kind} "{name}" is invalid: {text}', "Invalid", details)


def bad_request(message: str) -> ApiError:
    return ApiError(400, message, "BadRequest")


def gone(message: str) -> ApiError:
    return ApiError(410, message, "Expired")


def method_not_allowed() -> ApiError:
    return ApiError(405, "the server does not allow this method on the requested resource", "MethodNotAllowed", {})


def not_found_path() -> ApiError:
    return ApiError(404, "the server could not find the requested resource", "NotFound", {})


def unsupported_media_type(content_type: str) -> ApiError:
    return ApiError(
        415,
        f"the body of the request was in an unknown format - accepted media types include: "
        f"application/json-patch+json, application/merge-patch+json, "
        f"application/strategic-merge-patch+json (got {content_type!r})",
        "UnsupportedMediaType",
    )


def internal(message: str) -> ApiError:
    return ApiError(500, f"Internal error occurred: {message}", "InternalError", {"causes": [{"message": message}]})
