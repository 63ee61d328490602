"""The access-log codec on byte-level lines: decoding roles from variables and URL parameters, the identity rule,
re-encoding a changed query in the style it came in, the escapes of nginx and Apache, fields, and bad lines."""

from __future__ import annotations

import pytest

from adapters.accesslog.codec import AccessLogCodec
from adapters.accesslog.formats import FormatError, apache_layout, nginx_layout
from sidecar.api import BadRecord, ConfigValueError, Event, FieldError, RolesConfig, SchemaConfig

NGINX = SchemaConfig(format="access_log")
APACHE = SchemaConfig(format="access_log", apache_format="combined")
# 127.0.0.1 - - [time] "GET /search?q=cheap+flights&page=2 HTTP/1.1" 200 512 "-" "curl/8"
LINE = '127.0.0.1 - - [10/Oct/2000:13:55:36 -0700] "GET /search?q=cheap+flights&page=2 HTTP/1.1" 200 512 "-" "curl/8"'


def decode(codec: AccessLogCodec, *lines: str) -> tuple[list[Event], list[tuple[int, str]]]:
    bad: list[tuple[int, str]] = []
    return codec.decode_many(list(lines), "\n", bad), bad


def line(request: str, referer: str = "-", user: str = "127.0.0.1", agent: str = "curl/8") -> str:
    return f'{user} - - [10/Oct/2000:13:55:36 -0700] "GET {request} HTTP/1.1" 200 512 "{referer}" "{agent}"'


class TestDecode:
    def test_roles_from_variables_and_the_query_parameter(self) -> None:
        """The default roles read remote_addr, time_local and request.q (form encoding decoded)."""
        (ev,), bad = decode(AccessLogCodec(NGINX), LINE)
        assert bad == []
        assert (ev.user, ev.query, ev.time, ev.rank, ev.url) == (
            "127.0.0.1",
            "cheap flights",
            "10/Oct/2000:13:55:36 -0700",
            None,
            None,
        )

    def test_several_parameter_names_the_first_listed_that_the_url_has_wins(self) -> None:
        schema = SchemaConfig(format="access_log", roles=RolesConfig(query="request.q|query|search_query"))
        codec = AccessLogCodec(schema)
        evs, _ = decode(
            codec,
            line("/search?search_query=a&query=b"),
            line("/search?search_query=a&q=c"),
            line("/search?search_query=a"),
            line("/search?xq=1&myq=2"),
        )
        assert [e.query for e in evs] == ["b", "c", "a", ""]

    def test_a_parameter_name_inside_another_is_not_it(self) -> None:
        (ev,), _ = decode(AccessLogCodec(NGINX), line("/search?aq=no&q=yes"))
        assert ev.query == "yes"

    def test_percent_plus_and_nginx_escaped_utf8(self) -> None:
        evs, _ = decode(
            AccessLogCodec(NGINX),
            line("/search?q=a%2Bb+c%20d"),
            line("/search?q=caf\\xC3\\xA9"),  # curl sent raw UTF-8: nginx logs \xXX
            line("/search?q=caf%C3%A9"),
            line("/search?q=%E2%82"),  # cut UTF-8: U+FFFD, never an exception
        )
        assert [e.query for e in evs] == ["a+b c d", "café", "café", "\ufffd"]

    def test_a_line_that_is_not_a_search_has_the_empty_query(self) -> None:
        schema = SchemaConfig(format="access_log", search_path="/search")
        evs, bad = decode(AccessLogCodec(schema), line("/static/app.css"), line("/product?q=x"), line("/search?q=x"))
        assert bad == [] and [e.query for e in evs] == ["", "", "x"]

    def test_lines_that_do_not_match_are_dead_letters_with_a_reason(self) -> None:
        evs, bad = decode(AccessLogCodec(NGINX), "garbage", LINE, "", '1.2.3.4 - - [x] "GET /" 200')
        assert len(evs) == 1
        assert bad == [(i, "line_does_not_match_format") for i in (0, 2, 3)]

    def test_a_space_in_an_unquoted_value_still_parses(self) -> None:
        """The fast pattern stops at the next literal's first character; the slow one takes the rest."""
        text = '1.2.3.4 - john doe [10/Oct/2000:13:55:36 -0700] "GET /search?q=x HTTP/1.1" 200 5 "-" "a"'
        (ev,), bad = decode(AccessLogCodec(NGINX), text)
        assert bad == [] and ev.query == "x"
        assert AccessLogCodec(NGINX).get_field(ev, "remote_user") == "john doe"

    def test_apache_quotes_escaped_inside_a_quoted_value(self) -> None:
        text = line("/search?q=x", agent='Mozilla \\"quoted\\" \\\\ end')
        (ev,), bad = decode(codec := AccessLogCodec(APACHE), text)
        assert bad == []
        assert codec.get_field(ev, "http_user_agent") == 'Mozilla "quoted" \\ end'
        assert codec.encode(ev) == text


class TestEncode:
    def test_unchanged_lines_come_back_byte_for_byte(self) -> None:
        codec = AccessLogCodec(NGINX)
        lines = [LINE, line("/search?q=caf\\xC3\\xA9&x=%2b"), line("/a b"), LINE + "\r"]
        evs, _ = decode(codec, *lines)
        assert [codec.encode(e) for e in evs] == lines

    @pytest.mark.parametrize(
        ("request_target", "new", "expected"),
        [
            ("/search?q=cheap+flights&page=2", "cheap trips", "/search?q=cheap+trips&page=2"),
            ("/search?page=2&q=cheap%20flights", "cheap trips", "/search?page=2&q=cheap%20trips"),
            ("/search?q=a%2fb+c", "a/b d", "/search?q=a%2fb+d"),
            ("/search?q=a%2Fb+c", "a/b d", "/search?q=a%2Fb+d"),
            ("/search?q=caf%C3%A9", "thé", "/search?q=th%C3%A9"),
            ("/search?q=caf\\xC3\\xA9", "thé", "/search?q=th\\xC3\\xA9"),
            ("/search?q=a,b", "c,d e", "/search?q=c,d+e"),
            ("/search?q=x#frag", "y&z", "/search?q=y%26z#frag"),
            ("/search?q=x", "", "/search?q="),
            ("/search?q=x", 'say "hi"\\', "/search?q=say+%22hi%22%5C"),
        ],
    )
    def test_a_changed_query_keeps_the_style_and_the_other_parameters(
        self, request_target: str, new: str, expected: str
    ) -> None:
        codec = AccessLogCodec(NGINX)
        (ev,), _ = decode(codec, line(request_target))
        ev.query = new
        assert codec.encode(ev) == line(expected)
        (again,), _ = decode(AccessLogCodec(NGINX), codec.encode(ev))
        assert again.query == new

    def test_apache_escapes_lower_case_hex(self) -> None:
        codec = AccessLogCodec(APACHE)
        (ev,), _ = decode(codec, line("/search?q=caf\\xc3\\xa9"))
        assert ev.query == "café"
        ev.query = "thé"
        assert codec.encode(ev) == line("/search?q=th\\xc3\\xa9")

    def test_a_changed_user_and_time_are_written_as_the_server_escapes(self) -> None:
        codec = AccessLogCodec(NGINX)
        (ev,), _ = decode(codec, LINE)
        ev.user = 'u"1'
        assert codec.encode(ev) == LINE.replace("127.0.0.1", "u\\x221", 1)

    def test_a_query_for_a_line_without_the_parameter_is_a_bad_record(self) -> None:
        codec = AccessLogCodec(NGINX)
        (ev,), _ = decode(codec, line("/static/app.css"))
        assert codec.encode(ev) == line("/static/app.css")
        ev.query = "invented"
        with pytest.raises(BadRecord, match="query_on_non_search_request"):
            codec.encode(ev)

    def test_an_event_of_another_format_is_not_written(self) -> None:
        with pytest.raises(BadRecord, match="not_an_access_log_record"):
            AccessLogCodec(NGINX).encode(Event("u", "q"))

    def test_a_record_restored_from_the_state_store_is_still_unchanged(self) -> None:
        codec = AccessLogCodec(NGINX)
        (ev,), _ = decode(codec, LINE)
        record = codec.unpack_record(list(ev.record))
        restored = Event(ev.user, "cheap flights", ev.time, None, None, record, LINE, codec)
        assert codec.encode(restored) == LINE


class TestFields:
    def test_fields_are_the_variables_without_a_role(self) -> None:
        codec = AccessLogCodec(NGINX)
        (ev,), _ = decode(codec, line("/search?q=x", agent="A \\x22B\\x22"))
        assert dict(codec.fields(ev)) == {
            "remote_user": "-",
            "status": "200",
            "body_bytes_sent": "512",
            "http_referer": "-",
            "http_user_agent": 'A "B"',
        }
        assert codec.layout(ev) == [
            ("remote_addr", "user"),
            ("remote_user", None),
            ("time_local", "time"),
            ("request", "query"),
            ("status", None),
            ("body_bytes_sent", None),
            ("http_referer", None),
            ("http_user_agent", None),
        ]

    def test_set_and_remove_keep_the_line_in_step(self) -> None:
        codec = AccessLogCodec(NGINX)
        (ev,), _ = decode(codec, LINE)
        codec.set_field(ev, "http_user_agent", 'Firefox "1"')
        assert codec.get_field(ev, "http_user_agent") == 'Firefox "1"'
        assert codec.encode(ev) == LINE.replace('"curl/8"', '"Firefox \\x221\\x22"')
        codec.remove_field(ev, "status")
        assert codec.encode(ev).split('" ', 1)[1].startswith("- 512")
        (back,), bad = decode(AccessLogCodec(NGINX), codec.encode(ev))
        assert bad == [] and back.query == "cheap flights"

    def test_roles_and_unknown_names_are_refused(self) -> None:
        codec = AccessLogCodec(NGINX)
        (ev,), _ = decode(codec, LINE)
        for name, reason in [("remote_addr", "field_is_role"), ("request", "field_is_role"), ("nope", "no_such_field")]:
            with pytest.raises(FieldError, match=reason):
                codec.set_field(ev, name, "x")
        with pytest.raises(FieldError, match="no_such_field"):
            codec.get_field(ev, "nope")


class TestConfig:
    def test_roles_name_variables_of_the_format(self) -> None:
        with pytest.raises(ConfigValueError) as err:
            AccessLogCodec(SchemaConfig(format="access_log", roles=RolesConfig(user="cookie_sid")))
        assert err.value.key == "roles.user" and "cookie_sid" in err.value.problem

    def test_the_query_role_is_variable_dot_parameter(self) -> None:
        with pytest.raises(ConfigValueError) as err:
            AccessLogCodec(SchemaConfig(format="access_log", roles=RolesConfig(query="request")))
        assert err.value.key == "roles.query"

    def test_a_cookie_as_the_user(self) -> None:
        fmt = '$remote_addr $cookie_sid [$time_local] "$request"'
        schema = SchemaConfig(format="access_log", log_format=fmt, roles=RolesConfig(user="cookie_sid"))
        (ev,), _ = decode(AccessLogCodec(schema), '1.2.3.4 abc123 [t] "GET /s?q=x HTTP/1.0"')
        assert (ev.user, ev.query) == ("abc123", "x")

    def test_format_errors_say_where(self) -> None:
        with pytest.raises(ConfigValueError) as err:
            AccessLogCodec(SchemaConfig(format="access_log", log_format="$remote_addr$remote_user"))
        assert err.value.key == "log_format" and "character 13" in err.value.problem
        with pytest.raises(ConfigValueError) as err:
            AccessLogCodec(SchemaConfig(format="access_log", apache_format="%h %Z"))
        assert err.value.key == "apache_format" and "%Z" in err.value.problem
        with pytest.raises(ConfigValueError) as err:
            AccessLogCodec(SchemaConfig(format="access_log", apache_format="common", log_format="$a x"))
        assert err.value.key == "apache_format"


class TestFormats:
    def test_nginx_combined(self) -> None:
        layout = nginx_layout("combined")
        assert layout.variables == (
            "remote_addr",
            "remote_user",
            "time_local",
            "request",
            "status",
            "body_bytes_sent",
            "http_referer",
            "http_user_agent",
        )
        assert layout.literals[0] == "" and layout.literals[2] == " ["

    def test_apache_combined_names_as_nginx(self) -> None:
        apache = apache_layout('%h %l %u %t \\"%r\\" %>s %b \\"%{Referer}i\\" \\"%{User-agent}i\\"')
        assert apache == apache_layout("combined")
        assert apache.variables == (
            "remote_addr",
            "remote_logname",
            "remote_user",
            "time_local",
            "request",
            "status",
            "body_bytes_sent",
            "http_referer",
            "http_user_agent",
        )

    def test_apache_modifiers_cookies_and_percent(self) -> None:
        layout = apache_layout("%400,501{X-Forwarded-For}i %{sid}C %!200a 100%% %D")
        assert layout.variables == ("http_x_forwarded_for", "cookie_sid", "client_addr", "request_time_us")
        assert layout.literals[-2] == " 100% "

    def test_braced_nginx_variables_and_errors(self) -> None:
        assert nginx_layout("${remote_addr}x$status").variables == ("remote_addr", "status")
        with pytest.raises(FormatError):
            nginx_layout("no variables")
        with pytest.raises(FormatError):
            nginx_layout("$a ${b")
