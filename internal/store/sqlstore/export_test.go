package sqlstore

// RetakePageAnchorsAtOnce makes s take a flow's page anchors again as soon as more trails were
// inserted since than anchorEvery, so that the store tests walk that path too.
func RetakePageAnchorsAtOnce(s *Store) {
	if s.trailPages != nil { // SQLite only
		s.trailPages.retake = 0
	}
}
