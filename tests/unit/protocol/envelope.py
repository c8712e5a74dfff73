"""Check that a rendered result is a well-formed Part A envelope, using lxml as an outside judge."""

from __future__ import annotations

from lxml import etree

from app.domain.errors import ErrorCode

STATUSES = ("success", "error", "rejected")
_STRICT = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False)


def parse_envelope(xml: str) -> etree._Element:
    """Parse ``xml`` strictly and assert the envelope's fixed layout; return the root.

    Layout (Part A): ``<tool_result tool_name="...">`` holding ``<status>`` first, then ``<data>``
    for success, ``<error_details>`` (error_code, message, optional details_json) for an error, or
    ``<rule>``, ``<reason>`` (and optional details_json) for a Risk Guard rejection.
    """
    root = etree.fromstring(xml.encode("utf-8"), _STRICT)
    assert root.tag == "tool_result"
    assert list(root.attrib) == ["tool_name"]
    children = [child.tag for child in root]
    assert children[0] == "status"
    status = root.findtext("status")
    assert status in STATUSES
    if status == "success":
        assert children == ["status", "data"]
    elif status == "error":
        assert children == ["status", "error_details"]
        details = [child.tag for child in root.find("error_details")]
        assert details[:2] == ["error_code", "message"]
        assert details[2:] in ([], ["details_json"])
        assert root.findtext("error_details/error_code") in {code.value for code in ErrorCode}
        assert root.find("error_details/message") is not None
    else:
        assert children[:3] == ["status", "rule", "reason"]
        assert children[3:] in ([], ["details_json"])
    return root
