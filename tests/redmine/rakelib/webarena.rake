# Loaded by tests/redmine/app.py with `rake -R tests/redmine/rakelib webarena:setup`: a fresh
# database migrated, Redmine's default data loaded and a small public project seeded, in one Ruby
# process (each Rails boot costs seconds).
namespace :webarena do
  task :setup => :environment do
    Rake::Task['db:migrate'].invoke
    # The models were loaded before their tables existed: forget their cached columns.
    ActiveRecord::Base.connection.schema_cache.clear!
    ActiveRecord::Base.descendants.each(&:reset_column_information)
    Redmine::DefaultData::Loader.load('en')
    admin = User.find_by_login!('admin')
    admin.update_column(:must_change_passwd, false)  # admin/admin is too short to save with validations
    Setting.login_required = '0'
    project = Project.create!(name: 'Demo project', identifier: 'demo', is_public: true,
                              description: 'A project for tests')
    project.trackers = Tracker.all.to_a
    project.save!
    2.times do |i|
      Issue.create!(project: project, tracker: project.trackers.first, author: admin,
                    subject: "Demo issue #{i + 1}", description: "Body of demo issue #{i + 1}",
                    priority: IssuePriority.default || IssuePriority.first)
    end
    puts 'webarena:setup done'
  end
end
