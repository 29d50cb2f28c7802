// Shows each <time datetime="..."> in the reader's time zone; its title keeps the absolute UTC time.
for (const t of document.querySelectorAll("time[datetime]")) {
  const d = new Date(t.dateTime);
  if (!Number.isNaN(d.getTime())) {
    t.textContent = d.toLocaleString();
  }
}
