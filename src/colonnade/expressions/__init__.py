"""Predicates as a bound expression tree (read from Arrow compute expressions) and the rules
that decide, from partition values and segment statistics, what a predicate cannot match.

Both the table layer (scans) and the query layer (SQL pushdown) use them; this package imports
neither.
"""
