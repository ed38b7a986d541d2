"""The plugins shipped with mjfast, registered under the `mjfast/` type prefix."""
