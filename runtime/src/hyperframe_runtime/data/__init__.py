"""The data path: token shards on a volume, a user ``Dataset`` factory, and the loader that feeds
the frame loop (DataLoader workers, a disjoint part per data-parallel replica, a position saved in
every snapshot). ``hyperframe data prepare`` writes shards from text files (``data.prepare``)."""
