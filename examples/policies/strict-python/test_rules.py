"""The rules, natively: python3 -m unittest, with the bindings that
`componentize-py -d wit -w stale-lock-policy bindings DIR` writes on
PYTHONPATH (no component, no host)."""

import unittest

from componentize_py_types import Err
from wit_world.imports.types import (
    Action,
    Liveness_Alive,
    Liveness_Dead,
    Liveness_Unknown,
    Lock,
    PolicyError_InvalidSetting,
    UnreadableLock,
)

import rules

SECOND = rules.SECOND
HOUR = 3600 * SECOND


def lock(exclusive: bool, time: int, hostname: str) -> Lock:
    return Lock("l", time, exclusive, hostname, "u", 1, 0, 0, None, None)


def rule(settings, l, process, host) -> str:
    return rules.decide(10 * HOUR, settings, l, process, host).rule


class Rules(unittest.TestCase):
    def test_young_exclusive_locks_survive_even_a_dead_holder(self):
        s = rules.parse_settings([])
        dead, unknown = Liveness_Dead("gone"), Liveness_Unknown("?")
        self.assertEqual(rule(s, lock(True, 9 * HOUR, "a"), dead, dead), "young-exclusive")
        self.assertEqual(rule(s, lock(True, 8 * HOUR - SECOND, "a"), dead, unknown), "process-dead")
        self.assertEqual(rule(s, lock(False, 9 * HOUR, "a"), None, unknown), "expired")
        self.assertEqual(rule(s, lock(False, 9 * HOUR, "a"), None, Liveness_Alive("up")), "holder-alive")

    def test_trusted_hosts_match_patterns_case_insensitively(self):
        self.assertTrue(rules.matches("db-*", "DB-primary"))
        self.assertTrue(rules.matches("*.lan", "nas.lan"))
        self.assertFalse(rules.matches("db-*", "web-1"))
        self.assertTrue(rules.matches("ßackup-*", "ßackup-1"))
        self.assertTrue(rules.matches("*a*b", "xxaxxbxb"))
        self.assertFalse(rules.matches("*a*b", "xxaxxbxc"))
        self.assertTrue(rules.matches("**", "") and rules.matches("a*", "a"))
        self.assertFalse(rules.matches("a", ""))
        self.assertFalse(rules.matches("*a*a*a*a*a*a*a*a*b", "a" * 40))
        self.assertEqual(rules.quoted('a"b\\\n\x1b\x85é'), '"a\\"b\\\\\\n\\u{1b}\\u{85}é"')
        # Trimmed as Rust trims: U+0085 is white space, U+001C and U+FEFF are not.
        s = rules.parse_settings([("always-alive", "web-1\x85, \x1c,\ufeff")])
        self.assertEqual(s.always_alive, ["web-1", "\x1c", "\ufeff"])
        s = rules.parse_settings([("always-alive", "db-*, nas")])
        self.assertEqual(rule(s, lock(False, 0, "nas"), None, Liveness_Dead("x")), "trusted-host")

    def test_unreadable_files_are_kept_with_their_ages(self):
        now = 10 * HOUR
        bare = rules.unreadable(now, UnreadableLock("junk", 3, "not JSON", None, None))
        self.assertEqual((bare.action, bare.rule), (Action.KEEP, "unreadable"))
        self.assertEqual(bare.reason, "cannot read the lock file (not JSON); kept")
        aged = rules.unreadable(now, UnreadableLock("junk", 3, "not JSON", now - HOUR, now - 90 * SECOND))
        self.assertEqual(
            aged.reason,
            "cannot read the lock file (not JSON), stored 3600s ago, first seen 90s ago; kept",
        )

    def test_settings_are_checked(self):
        for key, value in [("stale-after", "0"), ("stale-after", "30"), ("stale-after", "90s"),
                           ("stale-after", "29m59s"), ("colour", "red")]:
            with self.assertRaises(Err) as refused:
                rules.parse_settings([(key, value)])
            self.assertIsInstance(refused.exception.value, PolicyError_InvalidSetting)
        for ok in ["30m", "1800s", "2h"]:
            rules.parse_settings([("stale-after", ok)])
        self.assertEqual(
            rules.parse_settings([("exclusive-min-age", "1h30m")]).exclusive_min_age, 90 * 60 * SECOND
        )


if __name__ == "__main__":
    unittest.main()
