"""The SMP v2 advisor: the seed's best practices and SMP v2's rules, and what `auto` resolves to."""
